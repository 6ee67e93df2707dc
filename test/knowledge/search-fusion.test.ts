import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { SearchRow } from '../../src/knowledge/search/search-repo.js';
import { fuse } from '../../src/knowledge/search/search.js';

/** A candidate of a two-term English question ('sauna', 'time'): `ranks` its ts_rank of each, `sim` its cosine. */
function row(sourceId: string, ranks: Array<number | null> | null, sim: number | null = null): SearchRow {
  return {
    source_id: sourceId,
    seq: 0,
    term_ranks: ranks,
    sim,
    languages: 'ee',
    website_id: null,
    title: sourceId,
    url: null,
    text: sourceId,
    updated_at: new Date(0),
    large: false,
  };
}

const HYBRID = { keyword: 1, vector: 0.5 };

test('the rare word of the question outweighs the common one', () => {
  // Four candidates hold 'time', one holds 'sauna': a passage with 'sauna' beats one ranking higher on 'time' alone.
  const rows = [row('src_time1', [null, 0.09]), row('src_time2', [null, 0.08]), row('src_time3', [null, 0.07]), row('src_sauna', [0.06, null])];
  const fused = fuse(rows, HYBRID, 5);
  assert.equal(fused[0].row.source_id, 'src_sauna');
  assert.deepEqual(fused.map((f) => f.row.source_id).slice(1), ['src_time1', 'src_time2', 'src_time3']);
});

test('coverage makes the score absolute; the vector side adds its cosine; nothing scores below zero', () => {
  const both = row('src_both', [0.06, 0.06]);
  const half = row('src_half', [0.06, null]);
  const [first, second] = fuse([both, half], HYBRID, 5);
  assert.equal(first.row, both);
  assert.equal(first.score, 1, 'every word, the best keyword score, no vector: the keyword weight');
  assert.ok(second.score < 0.6, `a passage holding half the question's weight scores about half: ${second.score}`);

  // Alone among the keyword candidates, the passage lacks the question's rarest word: a weak keyword answer, which a
  // vector-only passage of cosine 0.4 outranks.
  const vectorOnly = row('src_vector', null, 0.4);
  const fused = fuse([half, vectorOnly], HYBRID, 5);
  assert.deepEqual(fused.map((f) => f.row.source_id), ['src_vector', 'src_half']);
  assert.equal(fused[0].score, 0.2, 'vector weight × cosine');
  assert.ok(fused[1].score > 0 && fused[1].score < 0.2, `${fused[1].score}`);
  assert.deepEqual(fuse([row('src_none', null, null)], HYBRID, 5), [], 'a candidate of neither side is not an answer');
  assert.equal(fuse([both, half, vectorOnly], HYBRID, 1).length, 1, 'at most the limit');
});

test('a keyword-only search ignores the cosine; ties go by source id', () => {
  const fused = fuse([row('src_b', [0.05, 0.05], 0.9), row('src_a', [0.05, 0.05])], { keyword: 1, vector: 0 }, 5);
  assert.deepEqual(fused.map((f) => [f.row.source_id, f.score]), [['src_a', 1], ['src_b', 1]]);
});
