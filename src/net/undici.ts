import type * as Undici from 'undici';
import { guardedConnector, type ConnectorOptions } from './connector.js';

type UndiciApi = typeof Undici.default;

let loading: Promise<UndiciApi> | undefined;

/**
 * undici, the client of every outbound request, is a large part of the server's code: it is loaded with the
 * first outbound request instead of at every start. Its API is read
 * from the default export (CommonJS `module.exports`): the bundle's chunk of undici has no named exports.
 */
export function loadUndici(): Promise<UndiciApi> {
  loading ??= import('undici').then((module) => module.default);
  return loading;
}

/**
 * An undici Agent whose every connection goes through the SSRF guard (connector.ts), made with the first request
 * (undici loads then) and closed only if it was ever made.
 */
export class LazyGuardedAgent {
  private made: Promise<Undici.Agent> | undefined;

  constructor(
    private readonly guard: ConnectorOptions,
    private readonly options: Omit<Undici.Agent.Options, 'connect'>,
  ) {}

  get(): Promise<Undici.Agent> {
    this.made ??= loadUndici().then((undici) => new undici.Agent({ ...this.options, connect: guardedConnector(undici.buildConnector, this.guard) }));
    return this.made;
  }

  async close(): Promise<void> {
    await (await this.made)?.close();
  }

  /** Like close, but ends the requests in flight instead of waiting for them. */
  async destroy(): Promise<void> {
    await (await this.made)?.destroy();
  }
}
