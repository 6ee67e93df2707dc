import type * as Undici from 'undici';
import { guardedConnector, type ConnectorOptions } from './connector.js';

type UndiciApi = typeof Undici.default;

let loading: Promise<UndiciApi> | undefined;

/**
 * undici, the client of every outbound request, is a large part of the server's code: it is loaded with the
 * first outbound request instead of at every start (docs/decisions.md, "Start, third pass"). Its API is read
 * from the default export (CommonJS `module.exports`): the bundle's chunk of undici has no named exports.
 */
export function loadUndici(): Promise<UndiciApi> {
  loading ??= import('undici').then((module) => module.default);
  return loading;
}

/** An undici Agent whose every connection goes through the SSRF guard (connector.ts). */
export async function guardedAgent(guard: ConnectorOptions, options: Omit<Undici.Agent.Options, 'connect'>): Promise<Undici.Agent> {
  const undici = await loadUndici();
  return new undici.Agent({ ...options, connect: guardedConnector(undici.buildConnector, guard) });
}

/** A value made on first use (an Agent: undici loads then), and closed only if it was ever made. */
export class OnFirstUse<T> {
  private made: Promise<T> | undefined;
  constructor(private readonly make: () => Promise<T>) {}

  get(): Promise<T> {
    this.made ??= this.make();
    return this.made;
  }

  async ifMade(): Promise<T | undefined> {
    return this.made;
  }
}
