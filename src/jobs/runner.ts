import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import type { Clock } from '../clock.js';
import type { Db, Tx } from '../db/driver.js';
import { jobRepo, type JobRow } from './job-repo.js';
import { JOBS_CHANNEL } from './queue.js';
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
  private readonly running = new Map<number, AbortController>();
  private unlisten: (() => void) | undefined;

  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    private readonly log: Logger,
    options: RunnerOptions,
  ) {
    this.workerId = options.workerId ?? `${hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`;
    this.leaseMs = options.leaseMs ?? 60_000;
    this.loop = new WorkLoop({
      pollIntervalMs: options.pollIntervalMs,
      maxInFlight: options.concurrency ?? 8,
      claim: (limit) => this.claim(limit),
      onError: (error) => this.log.error({ err: error }, 'job runner error'),
    });
  }

  /** Runs `task` with `handler`; the payload has the type `enqueue` wrote it with (src/jobs/tasks.ts). */
  register<T extends string>(task: T, handler: TaskHandler<T>): this {
    // The one place a stored payload meets its type: jobs rows are written only by enqueue(), typed by the same map.
    this.handlers.set(task, (job, ctx) => handler(job as unknown as ClaimedJob<T>, ctx));
    return this;
  }

  async start(): Promise<void> {
    this.unlisten = await this.db.listen(JOBS_CHANNEL, () => this.loop.wake());
    this.loop.start();
  }

  wake(): void {
    this.loop.wake();
  }

  /** Stops claiming, lets running jobs finish for `graceMs`, then releases the leases of the rest. */
  async stop(graceMs = 10_000): Promise<void> {
    this.unlisten?.();
    const left = await this.loop.stop(graceMs);
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
    const tasks = [...this.handlers.keys()];
    if (tasks.length === 0) return { units: [], more: false };
    const now = this.clock.now();
    const rows = await jobRepo.claim(this.db, {
      workerId: this.workerId,
      leaseUntil: new Date(now.getTime() + this.leaseMs),
      now,
      tasks,
      limit,
      running: [...this.running.keys()],
    });
    return { units: rows.map((row) => () => this.execute(row)), more: rows.length === limit };
  }

  private async execute(row: JobRow): Promise<void> {
    const job: ClaimedJob = {
      id: row.id,
      task: row.task,
      tenantId: row.tenant_id,
      payload: row.payload,
      attempts: row.attempts,
      maxAttempts: row.max_attempts,
    };
    const log = this.log.child({ jobId: job.id, task: job.task, tenantId: job.tenantId ?? undefined, attempt: job.attempts });
    if (job.attempts > job.maxAttempts) {
      // Only reachable when earlier runs died holding the lease (crashes), never by a handled failure.
      await this.finish(job, 'failed', 'gave up: the job was claimed more times than max_attempts (worker crashes)');
      log.error('job failed after repeated worker crashes');
      return;
    }
    const handler = this.handlers.get(job.task);
    if (!handler) return;
    const controller = new AbortController();
    this.running.set(job.id, controller);
    const heartbeat = setInterval(() => void this.extendLease(job.id), Math.max(this.leaseMs / 3, 10));
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
    } finally {
      clearInterval(heartbeat);
      this.running.delete(job.id);
    }
  }

  private async completeIn(tx: Tx, jobId: number): Promise<void> {
    if (!(await jobRepo.complete(tx, this.workerId, jobId, this.clock.now()))) throw new LeaseLostError(jobId);
  }

  private async finish(job: ClaimedJob, state: 'succeeded' | 'failed', error?: string): Promise<void> {
    await jobRepo.finish(this.db, this.workerId, job.id, state, error?.slice(0, 2000) ?? null, this.clock.now());
  }

  private async extendLease(jobId: number): Promise<void> {
    await jobRepo
      .extendLease(this.db, this.workerId, jobId, new Date(this.clock.now().getTime() + this.leaseMs))
      .catch((error: unknown) => this.log.warn({ err: error, jobId }, 'could not extend job lease'));
  }
}
