import type { Clock } from '../clock.js';
import type { Db } from '../db/driver.js';

/**
 * What a domain's jobs add to the runner, returned by the function that registers its handlers: the
 * recurring jobs to schedule when workers start, and what to release when the runtime closes.
 */
export interface JobWorker {
  schedule?(db: Db, clock: Clock): Promise<void>;
  close?(): Promise<void>;
}
