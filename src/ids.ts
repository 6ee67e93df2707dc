import { randomBytes, randomFillSync } from 'node:crypto';

const alphabet = '0123456789abcdefghijklmnopqrstuvwxyz';

// Cryptographically random bytes drawn from a buffer refilled 4 KB at a time, not a randomBytes call per id:
// every request (its id) and every event takes a handful. Node's crypto.randomUUID buffers the same way.
const POOL_SIZE = 4096;
const pool = Buffer.alloc(POOL_SIZE);
let poolOffset = POOL_SIZE;

/** `length` fresh random bytes (a copy: callers may keep them). */
export function pooledRandomBytes(length: number): Buffer {
  if (length > POOL_SIZE) return randomBytes(length);
  if (poolOffset + length > POOL_SIZE) {
    randomFillSync(pool);
    poolOffset = 0;
  }
  const bytes = Buffer.from(pool.subarray(poolOffset, poolOffset + length));
  poolOffset += length;
  return bytes;
}

/** Bytes at or above this are skipped: 252 is the largest multiple of 36 in a byte, so every character is equally likely. */
const UNBIASED_LIMIT = 252;

/** Random identifier with a readable type prefix, e.g. `whk_3k9x…` (20 characters: 103 bits of entropy). */
export function newId(prefix: string, length = 20): string {
  let out = '';
  while (out.length < length) {
    // A few spare bytes: about 1.6% are skipped.
    for (const byte of pooledRandomBytes(length - out.length + 2)) {
      if (byte < UNBIASED_LIMIT && out.length < length) out += alphabet[byte % 36];
    }
  }
  return `${prefix}_${out}`;
}

/** Operator identifiers are exactly 24 lowercase hex characters, as the spec requires. */
export function newOperatorId(): string {
  return randomBytes(12).toString('hex');
}
