import { randomBytes } from 'node:crypto';

const alphabet = '0123456789abcdefghijklmnopqrstuvwxyz';

/** Random identifier with a readable type prefix, e.g. `whk_3k9x…` (about 103 bits of entropy). */
export function newId(prefix: string, length = 20): string {
  const bytes = randomBytes(length);
  let out = '';
  for (const byte of bytes) out += alphabet[byte % 36];
  return `${prefix}_${out}`;
}

/** Operator identifiers are exactly 24 lowercase hex characters, as the spec requires. */
export function newOperatorId(): string {
  return randomBytes(12).toString('hex');
}
