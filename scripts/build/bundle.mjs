// Bundles the compiled server (dist/src, from tsc) into dist/server, which `npm start` runs: Node 20 resolves,
// reads and compiles every module file on its own, so a start reads a few chunks instead of thousands of files.
// Our code and the packages of the request path are inlined; a package that finds
// files beside itself stays a plain import from node_modules. Lazy imports stay lazy: each is its own chunk.
import { readFile } from 'node:fs/promises';
import { readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const root = fileURLToPath(new URL('../../', import.meta.url));
const outdir = path.join(root, 'dist/server');
// Not inlined: pino (its transports start workers from files beside it), PGlite (its WebAssembly and data files),
// swagger-ui-dist (the docs page's assets), secure-json-parse (the JSON parser thread loads it by path) and the
// packages only some deployments load (pg, ioredis, prom-client, the S3 client, the MCP SDK, the file extractors).
const INLINED = new Set([
  'typebox',
  'libphonenumber-js',
  'fastify',
  '@fastify/swagger',
  '@fastify/type-provider-typebox',
  '@fastify/fast-json-stringify-compiler',
  'ajv',
  'ajv-formats',
  'fast-json-stringify',
  'undici',
  'robots-parser',
  'node-html-parser',
]);
const { dependencies } = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8'));
const external = Object.keys(dependencies)
  .filter((name) => !INLINED.has(name))
  .flatMap((name) => [name, `${name}/*`]);

// A module that finds files relative to itself (migrations, the embedded database template) keeps doing so from
// its place in dist/src: every chunk sits in outdir, so its own URL is outdir-relative.
const keepModuleUrls = {
  name: 'keep-module-urls',
  setup(esbuild) {
    esbuild.onLoad({ filter: /[\\/]dist[\\/]src[\\/].*\.js$/ }, async (args) => {
      const source = await readFile(args.path, 'utf8');
      if (!source.includes('import.meta.url')) return undefined;
      const own = JSON.stringify(path.relative(outdir, args.path).split(path.sep).join('/'));
      return { contents: source.replaceAll('import.meta.url', `new URL(${own}, import.meta.url).href`), loader: 'js' };
    });
  },
};

rmSync(outdir, { recursive: true, force: true });
await build({
  entryPoints: [path.join(root, 'dist/src/main.js')],
  outdir,
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  external,
  sourcemap: true,
  logLevel: 'warning',
  plugins: [keepModuleUrls],
  // Inlined CommonJS packages call require() (Node's built-ins, and the packages left out above).
  banner: { js: "import { createRequire as __m2mCreateRequire } from 'node:module'; const require = __m2mCreateRequire(import.meta.url);" },
});
console.log(`bundled the server into ${path.relative(root, outdir)}`);
