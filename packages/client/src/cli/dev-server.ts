import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { UsageError } from './errors.js';

/** The server checkout this CLI belongs to: packages/client/{src,dist}/cli → the repository root. */
export function serverRoot(): string {
  const root = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', '..');
  const manifest = join(root, 'package.json');
  const name = existsSync(manifest) ? (JSON.parse(readFileSync(manifest, 'utf8')) as { name?: string }).name : undefined;
  if (name !== 'm2m-messaging-api' || !existsSync(join(root, 'src', 'main.ts'))) {
    throw new UsageError('`m2m dev` runs the server of the checkout it belongs to; run it from a clone of the repository (npx m2m dev)');
  }
  return root;
}

export interface DevServer {
  child: ChildProcess;
  /** Resolves with the exit code when the server process ends. */
  exited: Promise<number>;
}

/**
 * Starts the API and its workers on the embedded database with the given admin token. The server's logs go to
 * this process's stderr, so stdout carries only what `m2m dev` prints itself.
 */
export function startServer(options: { port: number; adminToken: string; dataDir: string; env?: Record<string, string> }): DevServer {
  const env: NodeJS.ProcessEnv = { ...process.env, ...options.env, ADMIN_TOKEN: options.adminToken, HOST: '127.0.0.1', PORT: String(options.port), DATA_DIR: options.dataDir };
  delete env.DATABASE_URL;
  env.LOG_LEVEL ??= 'warn';
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], { cwd: serverRoot(), env, stdio: ['ignore', 2, 2] });
  const exited = new Promise<number>((resolveExit) => child.once('exit', (code, signal) => resolveExit(code ?? (signal ? 128 : 1))));
  return { child, exited };
}

/** Polls the health route until the server answers; fails if the process ends first or after a minute. */
export async function waitUntilReady(server: DevServer, origin: string): Promise<void> {
  let ended: number | undefined;
  void server.exited.then((code) => (ended = code));
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    if (ended !== undefined) throw new Error(`the server exited with status ${ended} before it was ready (is the port in use? try --port)`);
    try {
      const response = await fetch(`${origin}/healthz`, { signal: AbortSignal.timeout(2000) });
      if (response.ok) return;
    } catch {
      // not listening yet
    }
    await sleep(200);
  }
  throw new Error('the server did not answer within a minute');
}
