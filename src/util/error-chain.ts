/** An error and its causes (`cause`, or the first of an AggregateError's `errors`), outermost first. */
export function errorChain(err: unknown): Array<{ code?: unknown; name?: unknown; cause?: unknown }> {
  const out: Array<{ code?: unknown; name?: unknown; cause?: unknown }> = [];
  let current: unknown = err;
  while (typeof current === 'object' && current !== null && out.length < 8) {
    const e = current as { code?: unknown; name?: unknown; cause?: unknown; errors?: unknown };
    out.push(e);
    current = e.cause ?? (Array.isArray(e.errors) ? e.errors[0] : undefined);
  }
  return out;
}
