/** An answer that may be a redirect: a 3xx with a Location is followed. */
export interface Redirectable {
  status: number;
  location?: string;
}

/** Ends the walk early with the caller's own result (a refused hop, a page already stored, …). */
export class Stop<S> {
  constructor(readonly value: S) {}
}

export type Followed<A, S> =
  | { kind: 'answer'; url: URL; answer: A }
  | { kind: 'too_many'; url: URL }
  | { kind: 'stopped'; value: S };

export interface RedirectSteps<A extends Redirectable, S> {
  /** Redirects followed at most; the one past them ends the walk as too_many. */
  maxRedirects: number;
  /** One request; a Stop ends the walk. */
  request(url: URL): Promise<A | Stop<S>>;
  /** The next hop for a Location (resolved against `from` and checked by the caller), or a Stop. */
  next(location: string, from: URL): URL | Stop<S>;
}

/**
 * The one redirect follower of outbound requests: redirects are never followed by the HTTP client, but hop
 * by hop here, so every hop goes through the caller's checks (SSRF rules, same site, robots.txt) like a
 * fresh URL. Exceptions thrown by `request` or `next` pass through.
 */
export async function followRedirects<A extends Redirectable, S = never>(start: URL, steps: RedirectSteps<A, S>): Promise<Followed<A, S>> {
  let target = start;
  for (let hop = 0; ; hop += 1) {
    const answer = await steps.request(target);
    if (answer instanceof Stop) return { kind: 'stopped', value: answer.value };
    if (answer.status < 300 || answer.status >= 400 || !answer.location) return { kind: 'answer', url: target, answer };
    const next = steps.next(answer.location, target);
    if (next instanceof Stop) return { kind: 'stopped', value: next.value };
    target = next;
    if (hop >= steps.maxRedirects) return { kind: 'too_many', url: target };
  }
}
