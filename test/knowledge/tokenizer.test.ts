import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { Tiktoken } from 'js-tiktoken/lite';
import cl100k from 'js-tiktoken/ranks/cl100k_base';
import fc from 'fast-check';
import { asciiPieceEnd, countTokens, encode, tokenizer } from '../../src/knowledge/tokenizer.js';
import { cl100kRanks } from '../../src/knowledge/tokenizer-ranks.js';

/** Varied text: prose in several scripts, emoji, code, numbers, whitespace runs, special-token text, long pieces. */
function samples(): string[] {
  const fixed = [
    '', ' ', '  ', '\n', '\n\n\n', '\r\n', '\t\t  \n  ', 'a', 'hello world', 'Hello, World!',
    "I'm sure they'll've done it. DON'T YOU'D WE'RE 'S 's 'Ll",
    'El niño comió piñas en la montaña; ¿Qué tal, señor Muñoz? ¡Ánimo! àéîõü ÀÉÎÕÜ ç Ç',
    'Über Straße, Ärger, Öl, façade, naïve, coöperate',
    'emoji 😀😃😄 👍🏽 👨‍👩‍👧‍👦 🇪🇸🇺🇸 ❤️ ✅ 🧑🏿‍🚀',
    '中文字符测试，这是一个句子。日本語のテキスト。한국어 텍스트 Русский Ελληνικά עברית العربية हिन्दी ไทย',
    '1234567890123456789012345678901234567890 3.14159265358979 1,000,000 -42 0x1F 1e-9 ١٢٣',
    'function f(x) {\n  return x * 2; // comment\n}\n\nconst a = [1, 2, 3].map((v) => v ** 2);\n',
    'def foo(bar):\n    """Docstring."""\n    return {"a": 1, \'b\': [2, 3]}\n',
    '<div class="x">Hello &amp; <b>bye</b></div> https://example.com/path?query=1&x=y#frag',
    '<|endoftext|> <|fim_prefix|><|fim_middle|><|fim_suffix|><|endofprompt|>',
    'lone \uD800 surrogate \uDC00 here \uFFFD\uFEFF\u200B\u00A0nbsp',
    ' '.repeat(300), '\n'.repeat(200), ' \n'.repeat(100), `a${' '.repeat(40)}b`, '\t'.repeat(77) + 'x',
    // Single pieces longer than 128 bytes take the heap merge.
    '='.repeat(600), `${'-'.repeat(500)}\n`, 'a'.repeat(700), 'ab'.repeat(300), '🙂'.repeat(150), 'ñ'.repeat(200),
    'x'.repeat(129), '!'.repeat(128), '0'.repeat(999), 'supercalifragilisticexpialidocious '.repeat(20),
  ];
  let seed = 12345;
  const random = () => (seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 4294967296;
  const pools = ['abcdefghijklmnopqrstuvwxyz', 'ABCXYZ', '0123456789', ' ', '  \t', '\n', '.,;:!?-_()[]{}<>/\\|@#$%^&*+=~`"\'', 'áéíóúñü¿¡', '😀👍🏽🇪🇸', '中文日本語한국', 'абвгд', '\u0301\u200D\uFE0F'].map((p) => Array.from(p));
  const mixed: string[] = [];
  for (let k = 0; k < 1500; k += 1) {
    let s = '';
    const length = 1 + Math.floor(random() * 80);
    for (let j = 0; j < length; j += 1) {
      const pool = pools[Math.floor(random() * pools.length)];
      s += pool[Math.floor(random() * pool.length)].repeat(random() < 0.1 ? Math.floor(random() * 20) : 1);
    }
    mixed.push(s);
  }
  for (let k = 0; k < 300; k += 1) {
    let s = '';
    for (let j = 0; j < 30; j += 1) {
      const cp = random() < 0.5 ? Math.floor(random() * 0x800) : Math.floor(random() * 0x110000);
      s += cp <= 0xffff ? String.fromCharCode(cp) : String.fromCodePoint(cp);
    }
    mixed.push(s);
  }
  const files = ['README.md', 'docs/decisions.md', 'src/knowledge/chunker.ts', 'src/knowledge/tokenizer.ts'].map((f) => readFileSync(new URL(`../../${f}`, import.meta.url), 'utf8'));
  return [...fixed, ...mixed, ...files];
}

test('encode, countTokens and decode match js-tiktoken (cl100k_base) token for token', () => {
  const reference = new Tiktoken(cl100k);
  for (const text of samples()) {
    const label = JSON.stringify(text.slice(0, 40));
    const expected = reference.encode(text, [], []);
    assert.deepEqual(encode(text), expected, label);
    assert.equal(countTokens(text), expected.length, label);
    assert.equal(tokenizer().decode(expected), reference.decode(expected), label);
    // Token windows cut inside a character decode the same way (U+FFFD), as the chunker's hard split relies on.
    for (let start = 0; start < Math.min(expected.length, 60); start += 7) {
      const window = expected.slice(start, start + 5);
      assert.equal(tokenizer().decode(window), reference.decode(window), label);
    }
  }
});

test('known cl100k_base ids; special-token text is plain text; special ids decode', () => {
  assert.deepEqual(encode('hello world <|endoftext|>'), [15339, 1917, 83739, 8862, 728, 428, 91, 29]);
  assert.equal(countTokens(''), 0);
  assert.equal(tokenizer().decode([100257, 9906]), '<|endoftext|>Hello');
});

test('a 100k-character single piece is not quadratic (heap merge)', () => {
  const started = performance.now();
  assert.equal(countTokens('='.repeat(100_000)), encode('='.repeat(100_000)).length);
  assert.ok(performance.now() - started < 5000);
});

test('ASCII text is cut into the same pieces as the cl100k pattern cuts it, and counted the same', () => {
  const pattern = new RegExp(cl100kRanks().pat_str, 'gu');
  const byPattern = (text: string) => [...text.matchAll(pattern)].map((m) => m[0]);
  const byScanner = (text: string) => {
    const pieces: string[] = [];
    for (let start = 0; start < text.length; ) {
      const end = asciiPieceEnd(text, start);
      assert.ok(end > start, 'every piece is at least one character');
      pieces.push(text.slice(start, end));
      start = end;
    }
    return pieces;
  };
  // Contractions in any case, letters next to punctuation, digit runs, and every kind of whitespace run.
  const tricky = fc.constantFrom(..."aZsStTrReEvVmMlLdD09 \t\n\r\v\f.,!?-('\"_\x00\x1f\x7f", '  ', '\r\n', "'s", "'LL", "'rE", '1234', ' \n ');
  const texts = fc.oneof(fc.array(tricky, { maxLength: 60 }).map((parts) => parts.join('')), fc.string({ unit: 'binary-ascii', maxLength: 200 }));
  fc.assert(
    fc.property(texts, (text) => {
      assert.deepEqual(byScanner(text), byPattern(text), JSON.stringify(text));
      assert.equal(countTokens(text), encode(text).length, JSON.stringify(text));
    }),
    { seed: 20261126, numRuns: 20_000 },
  );
});
