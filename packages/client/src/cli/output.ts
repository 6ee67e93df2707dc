/** Prints a result: JSON for scripts (`--json`), or the human lines. */
export function emit(json: boolean, value: unknown, human: () => string): void {
  process.stdout.write(json ? `${JSON.stringify(value)}\n` : `${human()}\n`);
}

/** Aligned columns, the header first. */
export function table(header: string[], rows: Array<Array<string | number | boolean | null | undefined>>): string {
  const cells = [header, ...rows.map((row) => row.map((cell) => (cell === null || cell === undefined ? '' : String(cell))))];
  const widths = header.map((_, column) => Math.max(...cells.map((row) => row[column]?.length ?? 0)));
  return cells.map((row) => row.map((cell, column) => cell.padEnd(widths[column])).join('  ').trimEnd()).join('\n');
}
