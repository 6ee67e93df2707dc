/**
 * Tells a database that cannot be reached (for now) from a bug: the caller answers 503 with Retry-After for
 * the first and 500 for the second. Covers socket errors of node-postgres, its pool's own connection
 * errors, PostgreSQL's connection-class SQLSTATEs and a closed PGlite.
 */
const NETWORK_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ECONNABORTED', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN']);

// 08xxx: connection exception; 57P01-57P03: server shutting down, crashed or starting; 53300: too many connections.
const SQLSTATES = new Set(['57P01', '57P02', '57P03', '53300']);

const MESSAGES = [
  'Connection terminated',
  'timeout exceeded when trying to connect',
  'is not queryable',
  'Cannot use a pool after calling end on the pool',
  'PGlite is closed',
];

function one(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  const code = 'code' in error && typeof error.code === 'string' ? error.code : undefined;
  if (code !== undefined && (NETWORK_CODES.has(code) || SQLSTATES.has(code) || /^08[0-9A-Z]{3}$/.test(code))) return true;
  return MESSAGES.some((message) => error.message.includes(message));
}

/** True when `error` (or what it wraps: `cause`, AggregateError members) says the database is unreachable. */
export function isDatabaseUnavailable(error: unknown): boolean {
  for (let current = error, depth = 0; current !== undefined && depth < 5; depth += 1) {
    if (one(current)) return true;
    if (current instanceof AggregateError && current.errors.some(one)) return true;
    current = current instanceof Error ? current.cause : undefined;
  }
  return false;
}

/** What a client is told to wait before retrying while the database is unreachable. */
export const UNAVAILABLE_RETRY_AFTER_SECONDS = 5;
