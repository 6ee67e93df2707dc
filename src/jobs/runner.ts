import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import type { Clock } from '../clock.js';
import type { Db, Tx } from '../db/driver.js';
import { jobRepo, type JobRow } from './job-repo.js';
import { MAX_TASK_NAME, jobsChannel } from './queue.js';
import type { PayloadOf } from './tasks.js';
import { WorkLoop, type Claimed } from './work-loop.js';

export interface ClaimedJob<T extends string = string> {
  id: number;
  task: T;
  tenantId: string | null;
  payload: PayloadOf<T>;
  /** 1 on the first run; counts runs whose lease expired too. */
  attempts: number;
  maxAttempts: number;
}

export interface JobContext {
  clock: Clock;
  log: Logger;
  /** Aborted when the worker shuts down and the lease is being released. */
  signal: AbortSignal;
  /**
   * Marks the job succeeded inside the handler's own transaction, fenced by the lease: if another
   * worker has taken the job over, this throws and the transaction rolls back.
   */
  completeIn(tx: Tx): Promise<void>;
  /**
   * For a handler that completes the job in a statement of its own, fenced by the lease as completeIn is
   * (`id = lease.jobId AND locked_by = lease.workerId AND state = 'running'`): the lease, and `completed()` to
   * call once that statement did complete the job.
   */
  lease: { jobId: number; workerId: string };
  completed(): void;
}

export type TaskHandler<T extends string = string> = (job: ClaimedJob<T>, ctx: JobContext) => Promise<void>;

export interface BatchContext {
  clock: Clock;
  log: Logger;
  /** Aborted when the worker shuts down and the leases are being released. */
  signal: AbortSignal;
  /**
   * Marks these jobs succeeded inside the handler's own transaction, fenced by their leases: if another worker has
   * taken any of them over, this throws LeaseLostError and the transaction rolls back.
   */
  completeIn(tx: Tx, jobIds: readonly number[]): Promise<void>;
}

/**
 * Runs claimed jobs of one task together (work that is cheaper in groups, such as many small writes). Returns the
 * error of each job that failed, by job id: each is retried with backoff or failed as a single job's error is; the
 * others succeeded (completed by completeIn, or marked succeeded after the handler). A handler that throws fails
 * every job it was given.
 */
export type BatchHandler<T extends string = string> = (jobs: Array<ClaimedJob<T>>, ctx: BatchContext) => Promise<Map<number, unknown>>;

export class LeaseLostError extends Error {
  constructor(jobId: number) {
    super(`lease on job ${jobId} was lost to another worker`);
  }
}

export interface RunnerOptions {
  pollIntervalMs: number;
  concurrency?: number;
  leaseMs?: number;
  workerId?: string;
  /**
   * Tasks run in slots of their own (this many at once), beside the `concurrency` slots the other tasks share: work
   * that mostly waits on a remote service (a provider's API), which would otherwise hold the shared slots and be
   * held to their number.
   */
  lanes?: Readonly<Record<string, number>>;
}

function checkTaskName(task: string): void {
  if (Buffer.byteLength(task) > MAX_TASK_NAME) throw new Error(`task name "${task}" is longer than ${MAX_TASK_NAME} bytes (its wake-up channel name would not fit)`);
}

/** Retry delay after the n-th failed attempt: exponential from 1 s, capped at 1 h, with ±20% jitter. */
export function backoffMs(attempt: number): number {
  const base = Math.min(1000 * 2 ** (attempt - 1), 3_600_000);
  return Math.round(base * (0.8 + Math.random() * 0.4));
}

/**
 * Runs durable jobs: claims due (or lease-expired) jobs with FOR UPDATE SKIP LOCKED, keeps the lease
 * alive while a handler runs, retries failures with backoff and gives up after max_attempts.
 */
export class JobRunner {
  readonly workerId: string;
  private readonly handlers = new Map<string, TaskHandler>();
  private readonly leaseMs: number;
  private readonly loop: WorkLoop;
  /** One loop per task run in batches (one batch at a time each) or in a lane of its own. */
  private readonly ownLoops: WorkLoop[] = [];
  private readonly pollIntervalMs: number;
  private readonly lanes: Readonly<Record<string, number>>;
  /** The loop that claims each task: its own, or the shared one. */
  private readonly loopOf = new Map<string, WorkLoop>();
  private readonly running = new Map<number, AbortController>();
  private unlisten: Array<() => void> = [];

  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    private readonly log: Logger,
    options: RunnerOptions,
  ) {
    this.workerId = options.workerId ?? `${hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`;
    this.leaseMs = options.leaseMs ?? 60_000;
    this.pollIntervalMs = options.pollIntervalMs;
    this.lanes = options.lanes ?? {};
    this.loop = new WorkLoop({
      pollIntervalMs: options.pollIntervalMs,
      maxInFlight: options.concurrency ?? 8,
      claim: (limit) => this.claim(limit),
      wakeOnFinish: 'when-behind',
      onError: (error) => this.log.error({ err: error }, 'job runner error'),
    });
  }

  /** Runs `task` with `handler`; the payload has the type `enqueue` wrote it with (src/jobs/tasks.ts). */
  register<T extends string>(task: T, handler: TaskHandler<T>): this {
    checkTaskName(task);
    // The one place a stored payload meets its type: jobs rows are written only by enqueue(), typed by the same map.
    this.handlers.set(task, (job, ctx) => handler(job as unknown as ClaimedJob<T>, ctx));
    const slots = this.lanes[task];
    if (slots === undefined) {
      this.loopOf.set(task, this.loop);
    } else {
      this.addLoop(
        task,
        new WorkLoop({
          pollIntervalMs: this.pollIntervalMs,
          maxInFlight: slots,
          claim: async (limit) => {
            const rows = await this.claimOf([task], limit);
            return { units: rows.map((row) => () => this.execute(row)), more: rows.length === limit };
          },
          wakeOnFinish: 'when-behind',
          onError: (error) => this.log.error({ err: error, task }, 'job runner error'),
        }),
      );
    }
    return this;
  }

  private addLoop(task: string, loop: WorkLoop): void {
    this.ownLoops.push(loop);
    this.loopOf.set(task, loop);
  }

  /**
   * Runs `task` in batches of up to `maxJobs` jobs with `handler`, claimed together, one batch at a time, beside
   * the jobs of other tasks (which keep their own slots).
   */
  registerBatch<T extends string>(task: T, handler: BatchHandler<T>, maxJobs: number): this {
    checkTaskName(task);
    // As in register: the one place a stored payload meets its type.
    const run = handler as unknown as BatchHandler;
    this.addLoop(
      task,
      new WorkLoop({
        pollIntervalMs: this.pollIntervalMs,
        maxInFlight: 1,
        claim: async (free) => {
          if (free === 0) return { units: [], more: true };
          const rows = await this.claimOf([task], maxJobs);
          return { units: rows.length > 0 ? [() => this.executeBatch(rows, run)] : [], more: rows.length === maxJobs };
        },
        wakeOnFinish: 'when-behind',
        onError: (error) => this.log.error({ err: error, task }, 'job runner error'),
      }),
    );
    return this;
  }

  private get loops(): WorkLoop[] {
    return [this.loop, ...this.ownLoops];
  }

  async start(): Promise<void> {
    for (const [task, loop] of this.loopOf) this.unlisten.push(await this.db.listen(jobsChannel(task), () => loop.wake()));
    for (const loop of this.loops) loop.start();
  }

  /** Every loop looks for work now (tests, and after a change that makes waiting jobs due). */
  wake(): void {
    for (const loop of this.loops) loop.wake();
  }

  /** Stops claiming, lets running jobs finish for `graceMs`, then releases the leases of the rest. */
  async stop(graceMs = 10_000): Promise<void> {
    for (const off of this.unlisten.splice(0)) off();
    const left = (await Promise.all(this.loops.map((loop) => loop.stop(graceMs)))).reduce((a, b) => a + b, 0);
    if (left > 0) {
      const ids = [...this.running.keys()];
      for (const controller of this.running.values()) controller.abort();
      await jobRepo
        .release(this.db, this.workerId, ids, this.clock.now())
        .catch((error: unknown) => this.log.error({ err: error }, 'could not release job leases'));
      this.log.info({ jobs: ids }, 'released leases of unfinished jobs');
    }
  }

  private async claim(limit: number): Promise<Claimed> {
    const tasks = [...this.handlers.keys()].filter((task) => this.lanes[task] === undefined);
    if (tasks.length === 0) return { units: [], more: false };
    const rows = await this.claimOf(tasks, limit);
    return { units: rows.map((row) => () => this.execute(row)), more: rows.length === limit };
  }

  private claimOf(tasks: string[], limit: number): Promise<JobRow[]> {
    const now = this.clock.now();
    return jobRepo.claim(this.db, {
      workerId: this.workerId,
      leaseUntil: new Date(now.getTime() + this.leaseMs),
      now,
      tasks,
      limit,
      running: [...this.running.keys()],
    });
  }

  private logOf(job: ClaimedJob): Logger {
    return this.log.child({ jobId: job.id, task: job.task, tenantId: job.tenantId ?? undefined, attempt: job.attempts });
  }

  /** The job as its handler sees it; undefined (and failed) when earlier runs died holding its lease too often. */
  private async admit(row: JobRow): Promise<ClaimedJob | undefined> {
    const job: ClaimedJob = {
      id: row.id,
      task: row.task,
      tenantId: row.tenant_id,
      payload: row.payload,
      attempts: row.attempts,
      maxAttempts: row.max_attempts,
    };
    if (job.attempts <= job.maxAttempts) return job;
    // Only reachable when earlier runs died holding the lease (crashes), never by a handled failure.
    await this.finish(job, 'failed', 'gave up: the job was claimed more times than max_attempts (worker crashes)');
    this.logOf(job).error('job failed after repeated worker crashes');
    return undefined;
  }

  private async execute(row: JobRow): Promise<void> {
    const job = await this.admit(row);
    if (!job) return;
    const log = this.logOf(job);
    const handler = this.handlers.get(job.task);
    if (!handler) return;
    const controller = new AbortController();
    this.running.set(job.id, controller);
    const heartbeat = setInterval(() => void this.extendLeases([job.id]), Math.max(this.leaseMs / 3, 10));
    let jobCompleted = false;
    try {
      await handler(job, {
        clock: this.clock,
        log,
        signal: controller.signal,
        completeIn: async (tx) => {
          await this.completeIn(tx, job.id);
          jobCompleted = true;
        },
        lease: { jobId: job.id, workerId: this.workerId },
        completed: () => {
          jobCompleted = true;
        },
      });
      if (!jobCompleted) await this.finish(job, 'succeeded');
      log.debug('job succeeded');
    } catch (error) {
      if (controller.signal.aborted) return; // shutting down: stop() releases the lease
      await this.failed(job, error, log);
    } finally {
      clearInterval(heartbeat);
      this.running.delete(job.id);
    }
  }

  private async executeBatch(rows: JobRow[], handler: BatchHandler): Promise<void> {
    const jobs: ClaimedJob[] = [];
    for (const row of rows) {
      const job = await this.admit(row);
      if (job) jobs.push(job);
    }
    if (jobs.length === 0) return;
    const ids = jobs.map((job) => job.id);
    const controller = new AbortController();
    for (const id of ids) this.running.set(id, controller);
    const heartbeat = setInterval(() => void this.extendLeases(ids), Math.max(this.leaseMs / 3, 10));
    const completed = new Set<number>();
    const log = this.log.child({ task: jobs[0].task, jobs: ids.length });
    try {
      let failures: Map<number, unknown>;
      try {
        failures = await handler(jobs, {
          clock: this.clock,
          log,
          signal: controller.signal,
          completeIn: async (tx, jobIds) => {
            const done = await jobRepo.completeAll(tx, this.workerId, jobIds, this.clock.now());
            if (done !== jobIds.length) throw new LeaseLostError(jobIds[0]);
            tx.afterCommit(() => jobIds.forEach((id) => completed.add(id)));
          },
        });
      } catch (error) {
        failures = new Map(jobs.map((job) => [job.id, error]));
      }
      if (controller.signal.aborted) return; // shutting down: stop() releases the leases
      for (const job of jobs) {
        if (completed.has(job.id)) continue;
        if (failures.has(job.id)) await this.failed(job, failures.get(job.id), this.logOf(job));
        else await this.finish(job, 'succeeded');
      }
    } finally {
      clearInterval(heartbeat);
      for (const id of ids) this.running.delete(id);
    }
  }

  /** A run that failed: retried with backoff, or failed for good after its last attempt; a lost lease is the new owner's. */
  private async failed(job: ClaimedJob, error: unknown, log: Logger): Promise<void> {
    if (error instanceof LeaseLostError) {
      log.warn('job lease lost; another worker owns it now');
      return;
    }
    const message = error instanceof Error ? error.message : String(error);
    if (job.attempts >= job.maxAttempts) {
      await this.finish(job, 'failed', message);
      log.error({ err: error }, 'job failed permanently');
    } else {
      const retryAt = new Date(this.clock.now().getTime() + backoffMs(job.attempts));
      await jobRepo.retryLater(this.db, this.workerId, job.id, retryAt, message.slice(0, 2000), this.clock.now());
      log.warn({ err: error, retryAt }, 'job failed; retry scheduled');
    }
  }

  private async completeIn(tx: Tx, jobId: number): Promise<void> {
    if (!(await jobRepo.complete(tx, this.workerId, jobId, this.clock.now()))) throw new LeaseLostError(jobId);
  }

  private async finish(job: ClaimedJob, state: 'succeeded' | 'failed', error?: string): Promise<void> {
    await jobRepo.finish(this.db, this.workerId, job.id, state, error?.slice(0, 2000) ?? null, this.clock.now());
  }

  private async extendLeases(jobIds: readonly number[]): Promise<void> {
    await jobRepo
      .extendLeases(this.db, this.workerId, jobIds, new Date(this.clock.now().getTime() + this.leaseMs))
      .catch((error: unknown) => this.log.warn({ err: error, jobIds }, 'could not extend job lease'));
  }
}
