import { createHash, timingSafeEqual } from 'node:crypto';
import { DomainError } from '../errors.js';
import { hmacBase64url } from '../secrets.js';
import { stableStringify } from '../util/stable-json.js';

const MAX_CURSOR_LENGTH = 400;

function invalidCursor(message = 'cursor is invalid; copy nextCursor from the previous response and keep the same filters'): DomainError {
  return new DomainError('M2M_INVALID_CURSOR', message);
}

/**
 * Opaque, signed keyset cursors bound to the list they came from and to its filters.
 * Layout: base64url(JSON {l: list, f: filter hash, p: position}) "." HMAC.
 */
export class Cursors {
  constructor(private readonly key: Buffer) {}

  private filterHash(filters: unknown): string {
    return createHash('sha256').update(stableStringify(filters)).digest('base64url').slice(0, 16);
  }

  private sign(payload: string): string {
    return hmacBase64url(this.key, payload).slice(0, 27);
  }

  encode(list: string, filters: unknown, position: unknown): string {
    const payload = Buffer.from(JSON.stringify({ l: list, f: this.filterHash(filters), p: position })).toString('base64url');
    const cursor = `${payload}.${this.sign(payload)}`;
    if (cursor.length > MAX_CURSOR_LENGTH) throw new Error(`cursor for ${list} exceeds ${MAX_CURSOR_LENGTH} characters`);
    return cursor;
  }

  /** Returns the position, or throws M2M_INVALID_CURSOR when tampered, foreign, or made with other filters. */
  decode<T>(list: string, filters: unknown, cursor: string): T {
    const [payload, signature, extra] = cursor.split('.');
    if (!payload || !signature || extra !== undefined || cursor.length > MAX_CURSOR_LENGTH) throw invalidCursor();
    const expected = Buffer.from(this.sign(payload));
    const given = Buffer.from(signature);
    if (expected.length !== given.length || !timingSafeEqual(expected, given)) throw invalidCursor();
    let decoded: { l?: unknown; f?: unknown; p?: unknown };
    try {
      decoded = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
    } catch {
      throw invalidCursor();
    }
    if (decoded.l !== list) throw invalidCursor();
    if (decoded.f !== this.filterHash(filters)) {
      throw invalidCursor('cursor was made with different filters; keep every filter unchanged while paging');
    }
    return decoded.p as T;
  }

  /**
   * Like `decode`, but a bad cursor first runs `requireOwner`, so a missing parent answers 404 even when the
   * cursor is bad too (the check costs a query only then).
   */
  async decodeAfter<T>(list: string, filters: unknown, cursor: string, requireOwner: () => Promise<unknown>): Promise<T> {
    try {
      return this.decode<T>(list, filters, cursor);
    } catch (error) {
      await requireOwner();
      throw error;
    }
  }

  /**
   * The page of a keyset query that read `limit + 1` rows: the first `limit`, whether more follow, and then
   * `{ nextCursor }` (the position of the page's last row), to be spread into the response.
   */
  page<R>(list: string, filters: unknown, rows: R[], limit: number, position: (last: R) => unknown): KeysetPage<R> & { next: { nextCursor?: string } } {
    const { page, hasMore } = keysetSlice(rows, limit);
    const last = page[page.length - 1];
    return { page, hasMore, next: hasMore && last !== undefined ? { nextCursor: this.encode(list, filters, position(last)) } : {} };
  }
}

export interface KeysetPage<R> {
  page: R[];
  hasMore: boolean;
}

/** The first `limit` of `limit + 1` rows read, and whether the extra row says more follow. */
export function keysetSlice<R>(rows: R[], limit: number): KeysetPage<R> {
  return { page: rows.slice(0, limit), hasMore: rows.length > limit };
}
