import { isIP, isIPv6, type LookupFunction } from 'node:net';
import type { buildConnector } from 'undici';
import { BlockedDestinationError, isPublicIPv4, resolvePublicIPv4, type Resolver } from './guard.js';

export interface ConnectorOptions {
  allowPrivate: boolean;
  /** Deadline of connecting (TCP and TLS). */
  timeoutMs: number;
  resolver?: Resolver;
}

/**
 * A net-style lookup that only ever answers with addresses resolvePublicIPv4 approved,
 * so the socket connects to exactly the address that was checked (no DNS rebinding window).
 */
function guardedLookup(allowPrivate: boolean, resolver: Resolver | undefined): LookupFunction {
  return (hostname, options, callback) => {
    resolvePublicIPv4(hostname, { allowPrivate, resolver }).then(
      (addresses) => {
        const wanted = options.family === 'IPv4' ? 4 : options.family === 'IPv6' ? 6 : (options.family ?? 0);
        const answers = addresses
          .map((address) => ({ address, family: isIP(address) }))
          .filter((a) => wanted === 0 || a.family === wanted);
        if (answers.length === 0) {
          const err: NodeJS.ErrnoException = new Error(`no usable address for ${hostname}`);
          err.code = 'ENOTFOUND';
          callback(err, '');
          return;
        }
        if (options.all) callback(null, answers);
        else callback(null, answers[0].address, answers[0].family);
      },
      (err: NodeJS.ErrnoException) => callback(err, ''),
    );
  };
}

/**
 * The connector of every outbound request (webhook delivery, knowledge URL fetches, the crawler): each new
 * connection resolves the host, dials only approved public IPv4 addresses, and checks the peer after connecting.
 */
export function guardedConnector(build: typeof buildConnector, opts: ConnectorOptions): buildConnector.connector {
  const connect = build({
    timeout: opts.timeoutMs,
    keepAlive: true,
    lookup: guardedLookup(opts.allowPrivate, opts.resolver),
  });
  if (opts.allowPrivate) return connect;

  return (options, callback) => {
    // IP-literal hosts never reach the lookup; refuse them before any packet is sent.
    const literal = options.hostname;
    if (isIP(literal) !== 0 && (isIPv6(literal) || !isPublicIPv4(literal))) {
      process.nextTick(() => callback(new BlockedDestinationError(`destination ${literal} is not a public address`), null));
      return;
    }

    connect(options, (err, socket) => {
      if (err !== null) {
        callback(err, null);
        return;
      }
      // Last line of defence: whatever path led here, the peer must be a public IPv4 address.
      const remote = socket.remoteAddress;
      if (remote === undefined || !isPublicIPv4(remote)) {
        socket.destroy();
        callback(
          new BlockedDestinationError(`connection to ${options.hostname} reached non-public address ${remote ?? 'unknown'}`),
          null,
        );
        return;
      }
      callback(null, socket);
    });
  };
}
