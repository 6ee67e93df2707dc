import { BlockedDestinationError } from './guard.js';

/** Why an outbound request got no answer: one set for webhook delivery, knowledge fetches and the crawler. */
export type NetFailureCode = 'timeout' | 'dns' | 'connection' | 'blocked_destination' | 'tls';

export interface NetFailure {
  code: NetFailureCode;
  /** "CODE: message" of the most specific error in the chain; single line, no stack, bounded. */
  message: string;
  /** The host name does not resolve (ENOTFOUND, ENODATA): a host that vanished, told apart from one that is down. */
  hostNotFound: boolean;
  /** For blocked_destination: why the guard refused it, in its own words. */
  blockedReason?: string;
}

interface ErrorLike {
  name?: unknown;
  code?: unknown;
  message?: unknown;
  cause?: unknown;
  errors?: unknown;
}

const MAX_MESSAGE_LENGTH = 300;

/** The error itself, its `cause` chain and AggregateError members (net's happy-eyeballs reports those). */
function errorChain(err: unknown): ErrorLike[] {
  const out: ErrorLike[] = [];
  const queue: unknown[] = [err];
  while (queue.length > 0 && out.length < 10) {
    const e = queue.shift();
    if (typeof e !== 'object' || e === null || out.includes(e)) continue;
    out.push(e);
    const like: ErrorLike = e;
    if (like.cause !== undefined) queue.push(like.cause);
    if (Array.isArray(like.errors)) queue.push(...like.errors);
  }
  return out;
}

function codeOf(e: ErrorLike): string {
  return typeof e.code === 'string' ? e.code : '';
}

const TIMEOUT_CODES = new Set([
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
  'UND_ERR_ABORTED',
  'ABORT_ERR',
  'ETIMEDOUT',
]);
const NOT_FOUND_CODES = new Set(['ENOTFOUND', 'ENODATA']);
const DNS_CODES = new Set([...NOT_FOUND_CODES, 'ESERVFAIL', 'ETIMEOUT', 'ENONAME']);
const TLS_CODES = new Set([
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'EPROTO',
]);
const TLS_PREFIXES = ['ERR_TLS_', 'ERR_SSL_', 'ERR_OSSL_', 'CERT_'];

function isBlocked(e: ErrorLike): boolean {
  return e instanceof BlockedDestinationError || codeOf(e) === 'BLOCKED_DESTINATION';
}
function isTimeout(e: ErrorLike): boolean {
  return e.name === 'AbortError' || e.name === 'TimeoutError' || TIMEOUT_CODES.has(codeOf(e));
}
function isDns(e: ErrorLike): boolean {
  const code = codeOf(e);
  return DNS_CODES.has(code) || code.startsWith('EAI_');
}
function isTls(e: ErrorLike): boolean {
  const code = codeOf(e);
  return TLS_CODES.has(code) || TLS_PREFIXES.some((prefix) => code.startsWith(prefix));
}

/**
 * Classifies why an outbound request failed. `deadlinePassed`: the caller's own deadline for the request
 * had fired, so any failure but a blocked destination is a timeout.
 */
export function classifyNetError(err: unknown, deadlinePassed = false): NetFailure {
  const chain = errorChain(err);
  const hostNotFound = chain.some((e) => NOT_FOUND_CODES.has(codeOf(e)));
  const message = describe(chain, err);
  if (chain.some(isBlocked)) {
    const blocked = chain.find((e) => e instanceof BlockedDestinationError);
    const blockedReason = typeof blocked?.message === 'string' ? blocked.message : 'destination is not allowed';
    return { code: 'blocked_destination', message, hostNotFound: false, blockedReason };
  }
  if (deadlinePassed || chain.some(isTimeout)) return { code: 'timeout', message, hostNotFound: false };
  if (chain.some(isDns)) return { code: 'dns', message, hostNotFound };
  if (chain.some(isTls)) return { code: 'tls', message, hostNotFound: false };
  return { code: 'connection', message, hostNotFound: false };
}

function describe(chain: ErrorLike[], err: unknown): string {
  const pick =
    chain.find((e) => isBlocked(e) || isTimeout(e) || isDns(e) || isTls(e)) ?? chain.find((e) => codeOf(e) !== '') ?? chain[0];
  if (pick === undefined) return String(err).slice(0, MAX_MESSAGE_LENGTH);
  const label = codeOf(pick) || (typeof pick.name === 'string' ? pick.name : 'Error');
  const message = typeof pick.message === 'string' ? pick.message : '';
  const text = message ? `${label}: ${message}` : label;
  // eslint-disable-next-line no-control-regex
  return text.replace(/[\u0000-\u001f\u007f]+/g, ' ').trim().slice(0, MAX_MESSAGE_LENGTH);
}
