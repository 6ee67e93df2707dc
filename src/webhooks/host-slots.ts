import { performance } from 'node:perf_hooks';

interface Host {
  /** Attempts claimed for the host and not yet done with it (waiting, requesting, or canceled unsent). */
  held: number;
  /** Requests in flight: never more than the cap. */
  requests: number;
  /** Claimed attempts waiting for a request slot, in claim order. */
  waiting: Array<(granted: boolean) => void>;
  /** Requests ended in about the last PACE_WINDOW_MS (exponentially decayed), as of `paceAt`. */
  pace: number;
  paceAt: number;
}

/** How long, at a destination's recent pace, the attempts claimed ahead of its request slots may wait. */
const PACE_WINDOW_MS = 100;

/**
 * One dispatcher's per-destination concurrency: at most `cap` requests in flight per host. Beyond its free
 * request slots, a claim may take for a host as many attempts as the host finished in about the last 100 ms
 * (at most `cap`). Those wait here, in claim order, and start the moment a request to their host ends, so a
 * fast destination is not idle for a claim round trip after each batch; a slow one gets next to nothing
 * ahead and holds little more than what it is sending. With at most `cap` waiting, each waits for at most
 * one round of its host's requests (each bounded by the attempt timeout).
 */
export class HostSlots {
  private readonly hosts = new Map<string, Host>();
  private closed = false;

  constructor(
    private readonly cap: number,
    /** Called whenever an attempt is done with its host (a claim may find room again). */
    private readonly onRelease: () => void,
    /** Milliseconds on a monotonic clock (tests pass their own). */
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** The hosts holding attempts and how many more a claim may give each now (a host not listed may be given `cap`). */
  claimRoom(): { hosts: string[]; room: number[] } {
    const now = this.now();
    const hosts: string[] = [];
    const room: number[] = [];
    for (const [name, host] of this.hosts) {
      const ahead = Math.min(this.cap, Math.floor(decayed(host, now)));
      if (host.held === 0 && ahead === 0) {
        this.hosts.delete(name);
        continue;
      }
      hosts.push(name);
      room.push(Math.max(0, this.cap + ahead - host.held));
    }
    return { hosts, room };
  }

  /** Counts a claimed attempt against its host until `release`. */
  hold(name: string): void {
    const host = this.hosts.get(name) ?? { held: 0, requests: 0, waiting: [], pace: 0, paceAt: 0 };
    host.held += 1;
    this.hosts.set(name, host);
  }

  /** Resolves with a request slot of the host (at once while it has fewer than `cap` requests), or false once closed. */
  acquire(name: string): Promise<boolean> {
    const host = this.hosts.get(name);
    if (this.closed || !host) return Promise.resolve(false);
    if (host.requests < this.cap) {
      host.requests += 1;
      return Promise.resolve(true);
    }
    return new Promise((resolve) => host.waiting.push(resolve));
  }

  /** The attempt is done with its host: `requested` when it held a request slot, which passes to the next in line. */
  release(name: string, requested: boolean): void {
    const host = this.hosts.get(name);
    if (!host) return;
    host.held -= 1;
    if (requested) {
      const now = this.now();
      host.pace = decayed(host, now) + 1;
      host.paceAt = now;
      const next = host.waiting.shift();
      if (next) next(true);
      else host.requests -= 1;
    }
    this.onRelease();
  }

  /** No more slots: attempts still waiting get false (they were never sent). */
  close(): void {
    this.closed = true;
    for (const host of this.hosts.values()) for (const resolve of host.waiting.splice(0)) resolve(false);
  }
}

function decayed(host: Host, now: number): number {
  return host.pace * Math.exp(-(now - host.paceAt) / PACE_WINDOW_MS);
}
