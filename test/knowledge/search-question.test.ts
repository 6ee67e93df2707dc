import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { Db } from '../../src/db/driver.js';
import { migratedDatabase } from '../helpers/db.js';

// How a search question is read (src/knowledge/sql/knowledge_question.sql): in the language its words tell, as
// knowledge_text_config reads a chunk, or in both English and Spanish when they do not tell.
interface Question {
  every_word: string;
  but_one: string;
  any_word: string;
  terms: string[];
  languages: string;
}

let db: Db;
let close: () => Promise<void>;
before(async () => {
  ({ db, close } = await migratedDatabase());
});
after(() => close());

async function read(question: string): Promise<Question | undefined> {
  const rows = await db.query<Question>(
    `SELECT every_word::text, but_one::text, any_word::text, terms::text[] AS terms, languages FROM knowledge_question($1)`,
    [question],
  );
  return rows[0];
}

test('an English question is read as English lexemes only', async () => {
  const q = await read('Is there parking for my car?');
  assert.deepEqual(q, { every_word: `'car' & 'park'`, but_one: `'park' | 'car'`, any_word: `'car' | 'park'`, terms: [`'car'`, `'park'`], languages: 'ee' });
});

test('a Spanish question is read as Spanish lexemes only', async () => {
  const q = await read('¿A qué hora es el desayuno?');
  assert.deepEqual(q, { every_word: `'desayun' & 'hor'`, but_one: `'hor' | 'desayun'`, any_word: `'desayun' | 'hor'`, terms: [`'desayun'`, `'hor'`], languages: 'ss' });
});

test('words that do not tell the language are read both ways; each term says whose lexeme it is', async () => {
  const q = await read('late checkout');
  assert.ok(q);
  assert.equal(q.every_word, `'checkout' & 'late' | 'checkout' & 'lat'`, 'every English word, or every Spanish one');
  assert.deepEqual(q.terms, [`'checkout'`, `'lat'`, `'late'`]);
  assert.equal(q.languages, 'bse', "'checkout' both, 'lat' Spanish, 'late' English");
});

test('every word but one, and any word past eight words', async () => {
  const three = await read('What time is breakfast served?');
  assert.equal(three?.but_one, `'serv' & 'time' | 'breakfast' & 'time' | 'breakfast' & 'serv'`);
  const nine = await read('the sauna pool garden terrace breakfast dinner parking shuttle wifi');
  assert.equal(nine?.languages, 'eeeeeeeee');
  assert.equal(nine?.but_one, nine?.any_word, 'nine English words: any of them');
});

test('a question of stop words, punctuation or emoji has no reading; any script answers without error', async () => {
  assert.equal(await read('the and of ?!'), undefined);
  assert.equal(await read('🙂🙂 ... !!!'), undefined);
  for (const question of ['هل يوجد موقف سيارات؟', '駐車場はありますか', "can't & | ! <-> :* 'quoted'", 'x'.repeat(500)]) {
    const q = await read(question);
    assert.ok(q, question);
    assert.ok(q.terms.length > 0 && q.terms.every((term) => /^'[^&|!<>:()]+'$/.test(term)), `each term one quoted lexeme, no operator: ${q.terms.join(' ')}`);
    assert.equal(q.languages.length, q.terms.length, question);
  }
});
