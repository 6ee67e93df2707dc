/**
 * A timestamptz as the API prints it (what `iso()` makes of a Date: UTC, milliseconds, Z), formatted by the
 * database, so Node makes no Date per column; the database then formats it on every call, so hot list routes
 * prefer `epochMs` (a number neither side formats).
 */
export function isoText(column: string): string {
  return `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;
}

/** A timestamptz with microseconds, for keyset cursors: exact, so no row is skipped or repeated. */
export function cursorText(column: string): string {
  return `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;
}

/**
 * A timestamptz as epoch milliseconds (int8, read as a JS number; NULL stays NULL): the cheapest form for
 * both sides of a wide page of rows; `iso()` prints it.
 */
export function epochMs(column: string): string {
  return `(date_part('epoch', ${column}) * 1000)::int8`;
}

/** A timestamptz as epoch microseconds (exact: a float8 holds every microsecond of our era); see `isoMicros()`. */
export function epochMicros(column: string): string {
  return `(date_part('epoch', ${column}) * 1000000)::int8`;
}

/**
 * The keyset condition of a newest-first page after the row (`at`, `id`): `(atColumn, idColumn) < ($n, $n+1)`,
 * with its two values appended to `params`. Row comparison, so one index on (at, id) serves it.
 */
export function olderThan(params: unknown[], atColumn: string, idColumn: string, after: { at: unknown; id: unknown }): string {
  params.push(after.at, after.id);
  return `(${atColumn}, ${idColumn}) < ($${params.length - 1}::timestamptz, $${params.length})`;
}

/**
 * ` AND column = $n` for each filter given (undefined ones are left out), its value appended to `params`. A list
 * with optional filters is then one statement per combination of filters, each planned for what it filters, instead
 * of one catch-all (`$n IS NULL OR column = $n`) whose kept generic plan would fit none of them. Columns are the
 * code's own names, never input.
 */
export function equalIfGiven(params: unknown[], filters: Record<string, string | number | undefined>): string {
  let sql = '';
  for (const [column, value] of Object.entries(filters)) {
    if (value === undefined) continue;
    params.push(value);
    sql += ` AND ${column} = $${params.length}`;
  }
  return sql;
}

/**
 * A page size written into the statement's text rather than bound: a kept generic plan of `LIMIT $n` assumes a
 * tenth of the rows, which on a long list makes it look costlier than planning each call, so PostgreSQL plans
 * every call instead of keeping it. Page sizes are few (1..1,000), so are the statements; checked, as it becomes SQL.
 */
export function pageLimit(limit: number): string {
  if (!Number.isSafeInteger(limit) || limit < 1 || limit > 1_000) throw new RangeError(`page limit out of range: ${limit}`);
  return String(limit);
}
