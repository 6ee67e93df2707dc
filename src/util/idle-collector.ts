import { performance } from 'node:perf_hooks';
import { getHeapStatistics, setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

export interface IdleCollectorOptions {
  /** How often the event loop's use is looked at (ms). */
  checkMs: number;
  /**
   * Growth of external memory (buffers: request bodies, socket reads) over what was left after the last
   * collection that makes an idle process collect. A baseline, not an absolute figure: the embedded database's
   * WebAssembly memory is external memory too, and stays.
   */
  externalBytes: number;
  /** Told of each collection the collector ran: how long it held the event loop (ms). */
  onCollect?(pauseMs: number): void;
}

const DEFAULTS: IdleCollectorOptions = { checkMs: 2_000, externalBytes: 32 * 1024 * 1024 };
/** The event loop busy less than this share of a check's interval: the process is idle. */
const IDLE_UTILIZATION = 0.05;
/** A check interval this busy is a burst of traffic, after which the idle process collects too. */
const BURST_UTILIZATION = 0.5;

function isGc(value: unknown): value is NodeJS.GCFunction {
  return typeof value === 'function';
}

/** V8's collector as a function, without `--expose-gc` on the command line (nor `gc` on this context's global). */
function collectorFunction(): NodeJS.GCFunction | undefined {
  setFlagsFromString('--expose-gc');
  const gc: unknown = runInNewContext('gc');
  setFlagsFromString('--no-expose-gc');
  return isGc(gc) ? gc : undefined;
}

/**
 * Memory a burst of traffic took stays with the process after it is answered: V8 frees buffers (big bodies,
 * socket reads) and large objects only when it next collects, and it collects when JavaScript allocates, which an
 * idle server does not. So every `checkMs`, when the event loop was idle after a burst (or external memory grew by
 * `externalBytes`), the heap is collected, and once more at the next idle check: freed buffers are counted off,
 * and what the first collection swept given back, only then (docs/decisions.md, "Memory back after a burst").
 * Returns the stop function.
 */
export function startIdleCollector(options: Partial<IdleCollectorOptions> = {}): () => void {
  const { checkMs, externalBytes, onCollect } = { ...DEFAULTS, ...options };
  const gc = collectorFunction();
  if (!gc) return () => undefined;
  const external = () => getHeapStatistics().external_memory;
  let baseline = external();
  let last = performance.eventLoopUtilization();
  let burst = false;
  let again = false;
  const timer = setInterval(() => {
    const now = performance.eventLoopUtilization();
    const busy = performance.eventLoopUtilization(now, last).utilization;
    last = now;
    baseline = Math.min(baseline, external());
    if (busy >= BURST_UTILIZATION) burst = true;
    if (busy >= IDLE_UTILIZATION || !(again || burst || external() - baseline > externalBytes)) return;
    const started = performance.now();
    gc();
    onCollect?.(performance.now() - started);
    burst = false;
    again = !again;
    baseline = external();
    // The collection's own time is not traffic: the next interval starts after it.
    last = performance.eventLoopUtilization();
  }, checkMs);
  timer.unref();
  return () => clearInterval(timer);
}
