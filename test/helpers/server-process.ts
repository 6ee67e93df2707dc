import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import net from 'node:net';
import { fileURLToPath } from 'node:url';
import { Agent, request } from 'undici';
import { eventually } from './app.js';

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));

export async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** The environment of the test runner without what would point a child server at the runner's own database. */
export function inheritedEnv(): NodeJS.ProcessEnv {
  const inherited = { ...process.env };
  for (const name of ['DATABASE_URL', 'DATABASE_SCHEMA', 'DATA_DIR', 'NODE_TEST_CONTEXT', 'SECRET_KEY', 'METRICS_PORT', 'REDIS_URL']) delete inherited[name];
  return inherited;
}

/** The sources through the TypeScript loader, as tests run them. */
export const SOURCE_ENTRY = ['--import', 'tsx', 'src/main.ts'];

/** One run of the real server (`src/main.ts`) in a child process, with its own HTTP connection pool (a killed server leaves dead sockets). */
export class ServerProcess {
  readonly child: ChildProcess;
  /** A request the server never answers fails after a minute, naming itself, instead of timing the whole file out. */
  readonly agent = new Agent({ keepAliveTimeout: 1_000, connections: 16, headersTimeout: 60_000 });
  output = '';

  constructor(
    env: NodeJS.ProcessEnv,
    readonly base: string,
    private readonly adminToken: string,
    args: string[] = [],
    entry: string[] = SOURCE_ENTRY,
  ) {
    this.child = spawn(process.execPath, [...entry, ...args], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    const keep = (chunk: Buffer) => {
      this.output = (this.output + chunk.toString()).slice(-20_000);
    };
    this.child.stdout?.on('data', keep);
    this.child.stderr?.on('data', keep);
  }

  get exited(): boolean {
    return this.child.exitCode !== null || this.child.signalCode !== null;
  }

  async call<T = Record<string, unknown>>(method: string, path: string, body?: unknown, token = this.adminToken): Promise<{ status: number; body: T; headers: Record<string, string | string[] | undefined> }> {
    const response = await request(`${this.base}${path}`, {
      method: method as 'GET',
      dispatcher: this.agent,
      headers: { authorization: `Bearer ${token}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    const text = await response.body.text();
    return { status: response.statusCode, body: (text ? JSON.parse(text) : {}) as T, headers: response.headers };
  }

  /** Like call, but the status must be 2xx. */
  async ok<T = Record<string, unknown>>(method: string, path: string, body?: unknown, token = this.adminToken): Promise<T> {
    const response = await this.call<T>(method, path, body, token);
    assert.ok(response.status >= 200 && response.status < 300, `${method} ${path} → ${response.status} ${JSON.stringify(response.body)}`);
    return response.body;
  }

  async ready(): Promise<void> {
    await eventually(
      async () => {
        if (this.exited) throw new Error(`server exited early (${this.child.exitCode ?? this.child.signalCode}):\n${this.output}`);
        try {
          return (await this.call('GET', '/readyz')).status === 200;
        } catch {
          return false; // not listening yet
        }
      },
      60_000,
      'the server to be ready',
    );
  }

  /** Stops the server; any signal but SIGKILL asks for a graceful stop, which must end with exit code 0. */
  async kill(signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    try {
      if (!this.exited) {
        const exited = new Promise<number | null>((resolve) => this.child.once('exit', (code) => resolve(code)));
        this.child.kill(signal);
        const code = await exited;
        if (signal !== 'SIGKILL' && code !== 0) throw new Error(`the server did not stop cleanly on ${signal} (exit code ${code}):\n${this.output}`);
      }
    } finally {
      await this.agent.destroy().catch(() => undefined);
    }
  }
}
