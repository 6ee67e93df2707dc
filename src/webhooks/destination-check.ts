import { setTimeout as sleep } from 'node:timers/promises';
import { BlockedDestinationError, resolvePublicIPv4, type Resolver } from '../net/guard.js';

/** How long a create or PATCH waits for DNS before accepting the URL (the per-attempt check still applies). */
const LOOKUP_TIMEOUT_MS = 2_000;

/**
 * The destination check at create and PATCH: resolves the host now and returns why it is refused when any
 * answer is non-public (or it is IPv6-only). A host that does not resolve yet, or a slow resolver, is not a
 * refusal: DNS changes, and every delivery attempt resolves and checks again.
 */
export async function destinationRefusal(host: string, options: { allowPrivate: boolean; resolver?: Resolver }): Promise<string | undefined> {
  if (options.allowPrivate) return undefined;
  const stopTimer = new AbortController();
  const timeout = sleep(LOOKUP_TIMEOUT_MS, undefined, { signal: stopTimer.signal, ref: false }).catch(() => undefined);
  try {
    await Promise.race([resolvePublicIPv4(host, options), timeout]);
    return undefined;
  } catch (error) {
    return error instanceof BlockedDestinationError ? `url host is not allowed: ${error.message}` : undefined;
  } finally {
    stopTimer.abort();
  }
}
