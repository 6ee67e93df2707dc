// Lists import cycles among the TypeScript files under a folder (default src/), type-only imports included:
//   node --import tsx scripts/import-cycles.ts [folder]
// Exits 1 when there is one (the same check as `madge --circular --extensions ts src`).
import { readFileSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';

const root = path.resolve(process.argv[2] ?? 'src');

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const full = path.join(dir, name);
    if (statSync(full).isDirectory()) return files(full);
    return full.endsWith('.ts') ? [full] : [];
  });
}

const all = new Set(files(root));
const edges = new Map<string, string[]>();
for (const file of all) {
  const { importedFiles } = ts.preProcessFile(readFileSync(file, 'utf8'), true, true);
  const targets = importedFiles
    .map((i) => i.fileName)
    .filter((name) => name.startsWith('.'))
    .map((name) => path.resolve(path.dirname(file), name).replace(/\.js$/, '.ts'))
    .filter((target) => all.has(target));
  edges.set(file, targets);
}

// Tarjan's strongly connected components: every component of more than one file is a cycle.
let index = 0;
const indexOf = new Map<string, number>();
const low = new Map<string, number>();
const stack: string[] = [];
const onStack = new Set<string>();
const cycles: string[][] = [];
function visit(file: string): void {
  indexOf.set(file, index);
  low.set(file, index);
  index += 1;
  stack.push(file);
  onStack.add(file);
  for (const next of edges.get(file) ?? []) {
    if (!indexOf.has(next)) {
      visit(next);
      low.set(file, Math.min(low.get(file)!, low.get(next)!));
    } else if (onStack.has(next)) {
      low.set(file, Math.min(low.get(file)!, indexOf.get(next)!));
    }
  }
  if (low.get(file) === indexOf.get(file)) {
    const component: string[] = [];
    let member: string;
    do {
      member = stack.pop()!;
      onStack.delete(member);
      component.push(path.relative(process.cwd(), member));
    } while (member !== file);
    if (component.length > 1 || (edges.get(file) ?? []).includes(file)) cycles.push(component.sort());
  }
}
for (const file of all) if (!indexOf.has(file)) visit(file);

for (const cycle of cycles) console.log(`cycle: ${cycle.join(' ↔ ')}`);
console.log(`${all.size} files, ${cycles.length} import cycle(s)`);
process.exitCode = cycles.length > 0 ? 1 : 0;
