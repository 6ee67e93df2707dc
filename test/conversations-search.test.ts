import { test } from 'node:test';
import assert from 'node:assert/strict';
import { searchPatterns } from '../src/conversations/service.js';

test('contact search patterns: the query as typed, plus its digits when it looks like a phone number', () => {
  assert.deepEqual(searchPatterns('  María '), ['%maría%']);
  assert.deepEqual(searchPatterns('50%_off'), ['%50\\%\\_off%'], 'LIKE wildcards are escaped');
  assert.deepEqual(searchPatterns('5512'), ['%5512%']);
  assert.deepEqual(searchPatterns('55 12-34'), ['%55 12-34%', '%551234%'], 'spaces and dashes may be part of a name or handle too');
  assert.deepEqual(searchPatterns('+52 (55) 1234'), ['%52551234%'], 'with + or parentheses only the digits can match');
  assert.deepEqual(searchPatterns('a1'), ['%a1%']);
});
