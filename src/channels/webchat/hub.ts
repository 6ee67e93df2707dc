import type { Db } from '../../db/driver.js';
import { WEBCHAT_CHANNEL, webchatRepo } from './repo.js';

const BATCH = 1000;
/** Fallback for a lost wake-up (another node's commit while LISTEN was reconnecting). */
const POLL_MS = 5_000;
/** How long an id skipped by the sequence is waited for (a transaction that took it may commit late, or never). */
const WAIT_MS = 30_000;
/** Gaps wider than this are rollbacks or restarts, not concurrent writers: not waited for one by one. */
const MAX_GAP = 256;

/**
 * One per process: a single LISTEN and a single read of what is new per wake-up, after which only the streams of
 * the visitors concerned read their own rows. With a thousand visitors connected, a message costs two queries, not
 * a thousand. Ids skipped by the sequence are read again until they commit (or for WAIT_MS), so an event committed
 * after a higher id still wakes its visitor.
 */
export class WebchatHub {
  private readonly streams = new Map<string, Set<() => void>>();
  private count = 0;
  private active: Promise<{ unlisten: () => void; timer: NodeJS.Timeout }> | undefined;
  private lastId = '0';
  private readonly waiting = new Map<string, number>();
  private running = false;
  private again = false;

  constructor(
    private readonly db: Db,
    private readonly onError: (error: unknown) => void,
  ) {}

  /** Calls `wake` whenever the visitor may have new events; resolves once the hub listens. Returns the unsubscribe. */
  async subscribe(visitorId: string, wake: () => void): Promise<() => void> {
    let set = this.streams.get(visitorId);
    if (!set) this.streams.set(visitorId, (set = new Set()));
    set.add(wake);
    this.count++;
    this.active ??= this.activate();
    await this.active;
    let done = false;
    return () => {
      if (done) return;
      done = true;
      set.delete(wake);
      if (set.size === 0 && this.streams.get(visitorId) === set) this.streams.delete(visitorId);
      if (--this.count === 0 && this.active) {
        const active = this.active;
        this.active = undefined;
        void active.then(({ unlisten, timer }) => {
          unlisten();
          clearInterval(timer);
        });
      }
    };
  }

  private async activate() {
    this.lastId = await webchatRepo.latestId(this.db);
    this.waiting.clear();
    const unlisten = await this.db.listen(WEBCHAT_CHANNEL, () => void this.read());
    const timer = setInterval(() => void this.read(), POLL_MS);
    timer.unref();
    return { unlisten, timer };
  }

  private async read(): Promise<void> {
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = true;
    try {
      let rows: Array<{ id: string; visitor_id: string }>;
      do {
        this.again = false;
        const now = Date.now();
        for (const [id, since] of this.waiting) if (now - since > WAIT_MS) this.waiting.delete(id);
        rows = await webchatRepo.newSince(this.db, this.lastId, [...this.waiting.keys()], BATCH);
        const woken = new Set<string>();
        for (const row of rows) {
          this.waiting.delete(row.id);
          woken.add(row.visitor_id);
          const id = BigInt(row.id);
          const last = BigInt(this.lastId);
          if (id > last) {
            if (id - last > 1n && id - last <= BigInt(MAX_GAP)) for (let missing = last + 1n; missing < id; missing++) this.waiting.set(missing.toString(), now);
            this.lastId = row.id;
          }
        }
        for (const visitorId of woken) for (const wake of this.streams.get(visitorId) ?? []) wake();
      } while (this.again || rows.length === BATCH);
    } catch (error) {
      this.onError(error);
    } finally {
      this.running = false;
    }
  }
}
