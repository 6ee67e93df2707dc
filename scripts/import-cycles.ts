// Checks the import graph of the TypeScript files under a folder (default src/), type-only imports included:
//   node --import tsx scripts/import-cycles.ts [folder]
// 1. No import cycle (the same check as `madge --circular --extensions ts src`).
// 2. Dependencies point down: no file of the platform layer reaches a domain file, directly or through
//    other imports, and the catalogue (src/operations) never reaches the service container (DESIGN.md habit 19).
// Exits 1 when either fails.
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

// The platform layer sits below every domain: database, jobs, idempotency, cursors, errors, clock, request
// context, outbound network, utilities. Entries are the first path segment under the folder.
const PLATFORM = new Set(['db', 'jobs', 'platform', 'errors.ts', 'clock.ts', 'context.ts', 'net', 'util']);
const DOMAINS = new Set([
  'conversations',
  'messaging',
  'crm',
  'reservations',
  'knowledge',
  'webhooks',
  'events',
  'channels',
  'tenants',
  'admin',
  'mcp',
  'operations',
  'http',
  'services.ts',
]);
const topOf = (file: string) => path.relative(root, file).split(path.sep)[0];

/** The import chain from `file` to the first file it reaches that `forbidden` matches, if any (breadth first: the shortest). */
function reached(file: string, forbidden: (top: string) => boolean): string[] | undefined {
  const previous = new Map<string, string>([[file, '']]);
  const queue = [file];
  for (let next = queue.shift(); next !== undefined; next = queue.shift()) {
    if (forbidden(topOf(next))) {
      const chain = [next];
      for (let at = previous.get(next); at; at = previous.get(at)) chain.unshift(at);
      return chain;
    }
    for (const target of edges.get(next) ?? []) {
      if (!previous.has(target)) {
        previous.set(target, next);
        queue.push(target);
      }
    }
  }
  return undefined;
}

const violations: string[][] = [];
for (const file of all) {
  const top = topOf(file);
  let chain: string[] | undefined;
  if (PLATFORM.has(top)) chain = reached(file, (reachedTop) => DOMAINS.has(reachedTop));
  else if (top === 'operations') chain = reached(file, (reachedTop) => reachedTop === 'services.ts');
  if (chain) violations.push(chain.map((member) => path.relative(process.cwd(), member)));
}
for (const chain of violations) console.log(`layering: ${chain.join(' → ')}`);

console.log(`${all.size} files, ${cycles.length} import cycle(s), ${violations.length} layering violation(s)`);
process.exitCode = cycles.length > 0 || violations.length > 0 ? 1 : 0;
