/** ISO 8601 string of a database timestamp, or undefined when absent. */
export function iso(value: Date | string | null | undefined): string | undefined {
  if (value === null || value === undefined) return undefined;
  return (value instanceof Date ? value : new Date(value)).toISOString();
}
