import type { Server } from 'node:http';

/**
 * Socket-level limits against slow or idle clients (reasons in docs/decisions.md, "Hostile input").
 * They bound receiving a request only: responses that stream (the conversation event stream) are not cut.
 */
export const SERVER_LIMITS = {
  /** The whole request, body included, must arrive within this (Node answers 408 and closes the socket). */
  requestTimeoutMs: 30_000,
  /** The request line and headers must arrive within this; also closes connections that never send a byte. */
  headersTimeoutMs: 10_000,
} as const;

export function applyServerLimits(server: Server): void {
  server.headersTimeout = SERVER_LIMITS.headersTimeoutMs;
}
