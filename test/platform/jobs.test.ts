import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import pino from 'pino';
import { ManualClock, systemClock } from '../../src/clock.js';
import type { Db } from '../../src/db/driver.js';
import { enqueue } from '../../src/jobs/queue.js';
import { JobRunner, LeaseLostError } from '../../src/jobs/runner.js';
import { eventually } from '../helpers/app.js';
import { sharedDatabase } from '../helpers/shared-db.js';

const log = pino({ level: 'silent' });

interface JobState {
  state: string;
  attempts: number;
  last_error: string | null;
  run_at: Date;
}

async function jobState(db: Db, id: number): Promise<JobState> {
  return (await db.query<JobState>('SELECT state, attempts, last_error, run_at FROM jobs WHERE id = $1', [id]))[0];
}

describe('job runner', () => {
  let database: Awaited<ReturnType<typeof sharedDatabase>>;
  let db: Db;

  before(async () => {
    database = await sharedDatabase();
    db = await database.open();
  });
  after(async () => {
    await db.close();
    await database.drop();
  });

  test('a job enqueued in a transaction that rolls back never exists', async () => {
    await assert.rejects(
      db.transaction(async (tx) => {
        await enqueue(tx, new Date(), { task: 'rollback-probe', payload: { n: 1 } });
        throw new Error('abort');
      }),
    );
    const rows = await db.query(`SELECT id FROM jobs WHERE task = 'rollback-probe'`);
    assert.equal(rows.length, 0);
  });

  test('dedupe key: one pending job per key; a new one once it finished', async () => {
    const first = await db.transaction((tx) => enqueue(tx, new Date(), { task: 'dedupe', dedupeKey: 'k1', runAt: new Date(Date.now() + 3_600_000) }));
    const second = await db.transaction((tx) => enqueue(tx, new Date(), { task: 'dedupe', dedupeKey: 'k1' }));
    assert.ok(first);
    assert.equal(second, undefined);
    await db.query(`UPDATE jobs SET state = 'succeeded', finished_at = now() WHERE id = $1`, [first]);
    const third = await db.transaction((tx) => enqueue(tx, new Date(), { task: 'dedupe', dedupeKey: 'k1' }));
    assert.ok(third && third !== first);
  });

  test('two runners never run the same job, and every job runs', async () => {
    const total = 120;
    const runs = new Map<number, string[]>();
    const handler = (worker: string) => async (job: { id: number }) => {
      runs.set(job.id, [...(runs.get(job.id) ?? []), worker]);
      await new Promise((resolve) => setTimeout(resolve, Math.random() * 5));
    };
    const a = new JobRunner(db, systemClock, log, { pollIntervalMs: 20, concurrency: 4, workerId: 'a' }).register('exclusive', handler('a'));
    const b = new JobRunner(db, systemClock, log, { pollIntervalMs: 20, concurrency: 4, workerId: 'b' }).register('exclusive', handler('b'));
    await Promise.all([a.start(), b.start()]);
    await db.transaction(async (tx) => {
      for (let i = 0; i < total; i++) await enqueue(tx, new Date(), { task: 'exclusive', payload: { i } });
    });
    await eventually(async () => {
      const rows = await db.query<{ count: number }>(`SELECT count(*)::int AS count FROM jobs WHERE task = 'exclusive' AND state = 'succeeded'`);
      return rows[0].count === total;
    }, 30_000, 'all jobs to succeed');
    await Promise.all([a.stop(), b.stop()]);
    assert.equal(runs.size, total);
    for (const [id, workers] of runs) assert.equal(workers.length, 1, `job ${id} ran ${workers.length} times`);
  });

  test('a failing job is retried with backoff, then fails permanently after max attempts', async () => {
    const clock = new ManualClock();
    let calls = 0;
    const runner = new JobRunner(db, clock, log, { pollIntervalMs: 20 }).register('flaky', async () => {
      calls++;
      throw new Error(`boom ${calls}`);
    });
    await runner.start();
    const id = (await db.transaction((tx) => enqueue(tx, clock.now(), { task: 'flaky', maxAttempts: 3 })))!;
    const afterFirst = await eventually(async () => {
      const s = await jobState(db, id);
      return s.state === 'queued' && s.attempts === 1 ? s : undefined;
    }, 10_000, 'first failure');
    assert.equal(afterFirst.last_error, 'boom 1');
    assert.ok(afterFirst.run_at.getTime() > clock.now().getTime(), 'retry is scheduled in the future');
    // Not due yet: nothing happens until the clock moves past run_at.
    await new Promise((resolve) => setTimeout(resolve, 150));
    assert.equal(calls, 1);
    for (let attempt = 2; attempt <= 3; attempt++) {
      clock.set(new Date((await jobState(db, id)).run_at.getTime() + 1));
      runner.wake();
      await eventually(async () => (await jobState(db, id)).attempts === attempt && (await jobState(db, id)).state !== 'running', 10_000, `attempt ${attempt}`);
    }
    const final = await jobState(db, id);
    assert.equal(final.state, 'failed');
    assert.equal(final.last_error, 'boom 3');
    assert.equal(calls, 3);
    await runner.stop();
  });

  test('completeIn is fenced by the lease: a worker that lost its job cannot complete it', async () => {
    let outcome: unknown;
    const runner = new JobRunner(db, systemClock, log, { pollIntervalMs: 20, workerId: 'slow' }).register('fenced', async (job, ctx) => {
      // Another worker takes the job over (as after a lease expiry) before this one finishes.
      await db.query(`UPDATE jobs SET locked_by = 'someone-else' WHERE id = $1`, [job.id]);
      try {
        await db.transaction(async (tx) => {
          await tx.query(`INSERT INTO app_secrets (name, value) VALUES ('fenced-probe', 'x')`);
          await ctx.completeIn(tx);
        });
      } catch (error) {
        outcome = error;
        throw error;
      }
    });
    await runner.start();
    const id = (await db.transaction((tx) => enqueue(tx, new Date(), { task: 'fenced' })))!;
    await eventually(async () => outcome, 10_000, 'handler to finish');
    await runner.stop();
    assert.ok(outcome instanceof LeaseLostError);
    assert.equal((await db.query(`SELECT name FROM app_secrets WHERE name = 'fenced-probe'`)).length, 0, 'its writes rolled back');
    const state = await jobState(db, id);
    assert.equal(state.state, 'running', 'the job still belongs to the other worker');
  });

  test('a job whose worker was killed (SIGKILL) is picked up again after its lease expires', async () => {
    const id = (await db.transaction((tx) => enqueue(tx, new Date(), { task: 'block', payload: { important: true } })))!;
    await db.close(); // PGlite: one process at a time
    const child = spawn(process.execPath, ['--import', 'tsx', fileURLToPath(new URL('../fixtures/crash-worker.ts', import.meta.url))], {
      env: { ...process.env, ...database.env },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    try {
      await new Promise<void>((resolve, reject) => {
        let out = '';
        child.stdout.on('data', (chunk: Buffer) => {
          out += chunk.toString();
          if (out.includes(`claimed ${id}`)) resolve();
        });
        child.on('exit', (code) => reject(new Error(`worker exited early with ${code}`)));
        setTimeout(() => reject(new Error('worker did not claim the job')), 60_000);
      });
    } finally {
      child.kill('SIGKILL');
      await new Promise((resolve) => (child.exitCode !== null || child.signalCode !== null ? resolve(undefined) : child.once('exit', resolve)));
    }
    db = await database.open();
    const claimed = await jobState(db, id);
    assert.equal(claimed.state, 'running', 'the dead worker still holds the lease');
    let rerunPayload: unknown;
    const runner = new JobRunner(db, systemClock, log, { pollIntervalMs: 50, workerId: 'survivor' }).register('block', async (job) => {
      rerunPayload = job.payload;
    });
    await runner.start();
    await eventually(async () => (await jobState(db, id)).state === 'succeeded', 30_000, 'the job to be recovered');
    await runner.stop();
    assert.deepEqual(rerunPayload, { important: true });
    assert.equal((await jobState(db, id)).attempts, 2);
  });
});
