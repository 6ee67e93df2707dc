import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { test } from 'node:test';

const read = (path: string) => readFileSync(new URL(`../${path}`, import.meta.url), 'utf8');

test('package.json names each top-level field once (JSON.parse would silently keep the last)', () => {
  const manifest = read('package.json');
  const keys = [...manifest.matchAll(/^ {2}"([^"]+)":/gm)].map((match) => match[1]);
  const repeated = keys.filter((key, index) => keys.indexOf(key) !== index);
  assert.deepEqual(repeated, []);
  assert.deepEqual(Object.keys(JSON.parse(manifest) as object), keys);
});

test('the README names no path of the machine it was written on, and every example it links exists', () => {
  const readme = read('README.md');
  assert.deepEqual(readme.match(/(^|[\s`(])\/(work|home|Users|tmp)\/\S*/gm) ?? [], []);
  const linked = [...readme.matchAll(/\]\((examples\/[^)#]+)\)/g)].map((match) => match[1]);
  assert.ok(linked.includes('examples/tour.mjs'), 'the plain-JavaScript tour is documented');
  for (const path of linked) assert.ok(existsSync(new URL(`../${path}`, import.meta.url)), path);
});
