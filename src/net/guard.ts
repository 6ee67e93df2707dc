import { promises as dnsPromises } from 'node:dns';
import { BlockList, isIP, isIPv4, isIPv6 } from 'node:net';

// IANA special-purpose IPv4 ranges: never a legitimate webhook destination.
const SPECIAL_IPV4: ReadonlyArray<readonly [string, number]> = [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.0.2.0', 24],
  ['192.88.99.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
];

const SPECIAL_IPV6: ReadonlyArray<readonly [string, number]> = [
  ['::1', 128],
  ['::', 128],
  ['fe80::', 10],
  ['fc00::', 7],
  ['ff00::', 8],
  ['2001:db8::', 32],
];

const specialV4 = new BlockList();
for (const [net, prefix] of SPECIAL_IPV4) specialV4.addSubnet(net, prefix, 'ipv4');

const specialV6 = new BlockList();
for (const [net, prefix] of SPECIAL_IPV6) specialV6.addSubnet(net, prefix, 'ipv6');

const mappedV4 = new BlockList();
mappedV4.addSubnet('::ffff:0:0', 96, 'ipv6');

/** The IPv4 address embedded in an IPv4-mapped IPv6 address (::ffff:a.b.c.d or ::ffff:XXXX:XXXX), else null. */
function embeddedIPv4(ip: string): string | null {
  if (!isIPv6(ip) || !mappedV4.check(ip, 'ipv6')) return null;
  const tail = ip.slice(ip.lastIndexOf(':') + 1);
  if (isIPv4(tail)) return tail;
  const groups = ip.split(':');
  const hi = parseInt(groups[groups.length - 2] || '0', 16);
  const lo = parseInt(groups[groups.length - 1] || '0', 16);
  return [hi >> 8, hi & 0xff, lo >> 8, lo & 0xff].join('.');
}

function stripBrackets(host: string): string {
  return host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
}

export function isPublicIPv4(ip: string): boolean {
  if (isIPv4(ip)) return !specialV4.check(ip, 'ipv4');
  const embedded = embeddedIPv4(ip);
  return embedded !== null && !specialV4.check(embedded, 'ipv4');
}

/** True for IPv6 answers that make a host unacceptable; other global IPv6 answers are merely ignored. */
function isNonPublicIPv6(ip: string): boolean {
  if (embeddedIPv4(ip) !== null) return !isPublicIPv4(ip);
  return specialV6.check(ip, 'ipv6');
}

export class BlockedDestinationError extends Error {
  readonly code = 'BLOCKED_DESTINATION';

  constructor(message: string) {
    super(message);
    this.name = 'BlockedDestinationError';
  }
}

export type Resolver = (hostname: string) => Promise<Array<{ address: string; family: 4 | 6 }>>;

export interface GuardOptions {
  allowPrivate: boolean;
  resolver?: Resolver;
}

const defaultResolver: Resolver = async (hostname) => {
  const answers = await dnsPromises.lookup(hostname, { all: true, verbatim: true });
  return answers.map((a) => ({ address: a.address, family: a.family === 6 ? 6 : 4 }));
};

/**
 * Resolves a host name to the IPv4 addresses it is safe to connect to.
 * Throws BlockedDestinationError when the destination is not allowed, and passes
 * resolver errors (ENOTFOUND, EAI_AGAIN, ...) through unchanged.
 */
export async function resolvePublicIPv4(hostname: string, opts: GuardOptions): Promise<string[]> {
  const host = stripBrackets(hostname);

  const literalFamily = isIP(host);
  if (literalFamily !== 0) {
    if (opts.allowPrivate) return [host];
    if (literalFamily === 6) {
      throw new BlockedDestinationError(`IPv6 destinations are unsupported (${host})`);
    }
    if (!isPublicIPv4(host)) {
      throw new BlockedDestinationError(`destination ${host} is not a public address`);
    }
    return [host];
  }

  const answers = await (opts.resolver ?? defaultResolver)(host);
  if (answers.length === 0) {
    const err: NodeJS.ErrnoException = new Error(`no addresses found for ${host}`);
    err.code = 'ENOTFOUND';
    throw err;
  }

  const v4 = answers.filter((a) => a.family === 4).map((a) => a.address);
  const v6 = answers.filter((a) => a.family === 6).map((a) => a.address);

  if (opts.allowPrivate) return [...v4, ...v6];

  for (const address of v4) {
    if (!isPublicIPv4(address)) {
      throw new BlockedDestinationError(`${host} resolves to non-public address ${address}`);
    }
  }
  for (const address of v6) {
    if (isNonPublicIPv6(address)) {
      throw new BlockedDestinationError(`${host} resolves to non-public address ${address}`);
    }
  }
  if (v4.length === 0) {
    throw new BlockedDestinationError(`IPv6-only destinations are unsupported (${host})`);
  }
  return v4;
}

const MAX_URL_LENGTH = 2048;
const BLOCKED_SUFFIXES = ['.localhost', '.local', '.internal', '.home.arpa'];

/** Static check of a webhook URL, done when a subscription is created or updated. */
export function validateWebhookUrl(
  raw: string,
  opts: { allowPrivate: boolean },
): { ok: true; url: URL } | { ok: false; reason: string } {
  if (raw.length > MAX_URL_LENGTH) {
    return { ok: false, reason: `url must be at most ${MAX_URL_LENGTH} characters` };
  }

  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return { ok: false, reason: 'url must be a valid absolute URL' };
  }

  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    return { ok: false, reason: 'url must use http or https' };
  }
  if (url.username !== '' || url.password !== '') {
    return { ok: false, reason: 'url must not contain credentials' };
  }
  if (url.hash !== '') {
    return { ok: false, reason: 'url must not contain a fragment' };
  }
  if (url.hostname === '') {
    return { ok: false, reason: 'url must have a host' };
  }

  if (opts.allowPrivate) return { ok: true, url };

  if (url.protocol !== 'https:') {
    return { ok: false, reason: 'url must use https' };
  }
  // WHATWG URL drops the default port, so an explicit :443 also ends up empty here.
  if (url.port !== '' && url.port !== '443') {
    return { ok: false, reason: 'url must use the default https port (443)' };
  }

  // A trailing dot names the same host ("localhost." === "localhost").
  const host = url.hostname.toLowerCase().replace(/\.$/, '');

  if (host.startsWith('[')) {
    return { ok: false, reason: 'IPv6 address urls are unsupported' };
  }
  if (host === 'localhost' || BLOCKED_SUFFIXES.some((suffix) => host.endsWith(suffix))) {
    return { ok: false, reason: 'url host must be a public host name' };
  }
  // WHATWG URL already normalises shorthand IPv4 forms (0x7f.1, 2130706433) to dotted quads.
  if (isIPv4(host) && !isPublicIPv4(host)) {
    return { ok: false, reason: 'url host must be a public address' };
  }

  return { ok: true, url };
}
