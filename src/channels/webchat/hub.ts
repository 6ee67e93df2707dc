import type { Db } from '../../db/driver.js';
import { WEBCHAT_CHANNEL, webchatRepo, type HubEventRow } from './repo.js';

const BATCH = 1000;
/** Fallback for a lost wake-up (another node's commit while LISTEN was reconnecting). */
const POLL_MS = 5_000;
/** How long an id skipped by the sequence is waited for (a transaction that took it may commit late, or never). */
const WAIT_MS = 30_000;
/** Gaps wider than this are rollbacks or restarts, not concurrent writers: not waited for one by one. */
const MAX_GAP = 256;

/** Called with a visitor's new events (in id order) whenever the hub read some; a stream reads its rows itself when they do not follow on from what it wrote. */
export type StreamWake = (rows: readonly HubEventRow[]) => void;

/**
 * One per process: a single LISTEN and a single read of what is new per wake-up, handed to the streams of the
 * visitors concerned. With a thousand visitors connected, a message costs one query, not a thousand: a stream
 * writes the rows it is handed when they follow on from the last one it wrote, and reads its own rows only when
 * they do not (src/channels/webchat/stream.ts). Ids skipped by the sequence are read again until they commit (or
 * for WAIT_MS), so an event committed after a higher id still reaches its visitor.
 */
export class WebchatHub {
  private readonly streams = new Map<string, Set<StreamWake>>();
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

  /** Calls `wake` with the visitor's new events; resolves once the hub listens. Returns the unsubscribe. */
  async subscribe(visitorId: string, wake: StreamWake): Promise<() => void> {
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
      let rows: HubEventRow[];
      do {
        this.again = false;
        const now = Date.now();
        for (const [id, since] of this.waiting) if (now - since > WAIT_MS) this.waiting.delete(id);
        rows = await webchatRepo.newSince(this.db, this.lastId, [...this.waiting.keys()], BATCH);
        const byVisitor = new Map<string, HubEventRow[]>();
        for (const row of rows) {
          this.waiting.delete(row.id);
          const mine = byVisitor.get(row.visitor_id);
          if (mine) mine.push(row);
          else byVisitor.set(row.visitor_id, [row]);
          const id = BigInt(row.id);
          const last = BigInt(this.lastId);
          if (id > last) {
            if (id - last > 1n && id - last <= BigInt(MAX_GAP)) for (let missing = last + 1n; missing < id; missing++) this.waiting.set(missing.toString(), now);
            this.lastId = row.id;
          }
        }
        for (const [visitorId, mine] of byVisitor) for (const wake of this.streams.get(visitorId) ?? []) wake(mine);
      } while (this.again || rows.length === BATCH);
    } catch (error) {
      this.onError(error);
    } finally {
      this.running = false;
    }
  }
}
