import { test } from 'node:test';
import assert from 'node:assert/strict';
import { contactSearch } from '../../src/conversations/service.js';

test('contact search: the query as typed, its digits when it looks like a phone number, a phone prefix after "+"', () => {
  assert.deepEqual(contactSearch('  María '), { patterns: ['%maría%'] });
  assert.deepEqual(contactSearch('50%_off'), { patterns: ['%50\\%\\_off%'] }, 'LIKE wildcards are escaped');
  assert.deepEqual(contactSearch('5512'), { patterns: ['%5512%'] });
  assert.deepEqual(contactSearch('55 12-34'), { patterns: ['%55 12-34%', '%551234%'] }, 'spaces and dashes may be part of a name or handle too');
  assert.deepEqual(contactSearch('(55) 12-34'), { patterns: ['%551234%'] }, 'with parentheses only the digits can match');
  assert.deepEqual(contactSearch('+52 (55) 1234'), { patterns: [], phonePrefix: '+52551234' }, 'a leading + is the start of an E.164 number');
  assert.deepEqual(contactSearch(' +1 415 '), { patterns: [], phonePrefix: '+1415' });
  assert.deepEqual(contactSearch('+x'), { patterns: ['%+x%'] }, 'not a number');
  assert.deepEqual(contactSearch('a1'), { patterns: ['%a1%'] });
});
