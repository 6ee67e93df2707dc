import type { Socket } from 'node:net';
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { isDatabaseUnavailable, UNAVAILABLE_RETRY_AFTER_SECONDS } from '../db/unavailable.js';
import { closeIfBodyUnread } from './body-rate.js';
import { DomainError, errorBody, statusOf, type ErrorCode, type Issue } from '../errors.js';
import { pooledRandomBytes } from '../ids.js';
import { UNSUPPORTED_VALUES } from './validation.js';

/**
 * The one place that turns anything refused or thrown into the error envelope with X-Request-Id: domain errors,
 * validation, Fastify's parser and router refusals (bad URL escapes, over-long parameters, body size, content
 * type), Node's HTTP parser refusals (header overflow, malformed requests, timeouts) and an unreachable database.
 */

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;
/** A 400 lists at most this many issues: a body of 100,000 wrong items must not produce a 100,000-line answer. */
const MAX_ISSUES = 20;

/** The caller's X-Request-Id when it is safe to echo, else a new `req_…` id. */
export function requestIdOf(given: string | string[] | undefined): string {
  return typeof given === 'string' && REQUEST_ID.test(given) ? given : newRequestId();
}

export function newRequestId(): string {
  return `req_${pooledRandomBytes(9).toString('base64url')}`;
}

export interface ErrorResponse {
  status: number;
  code: ErrorCode;
  message: string;
  details: Record<string, unknown>;
  headers?: Record<string, string | number>;
}

function invalidRequest(path: string, message: string, status = 400): ErrorResponse {
  return { status, code: 'M2M_INVALID_REQUEST', message: `${path}: ${message}`, details: { issues: [{ path, message }] } };
}

/** 400 from a list of issues, capped at MAX_ISSUES (details.truncatedIssues counts the rest). */
export function invalidIssues(all: Issue[]): ErrorResponse {
  const issues = all.slice(0, MAX_ISSUES);
  const more = all.length - issues.length;
  return {
    status: 400,
    code: 'M2M_INVALID_REQUEST',
    message: issues.map((i) => `${i.path}: ${i.message}`).join('; ') + (more > 0 ? `; and ${more} more` : ''),
    details: more > 0 ? { issues, truncatedIssues: more } : { issues },
  };
}

function issuesOf(error: FastifyError): Issue[] {
  const where = error.validationContext === 'querystring' ? 'query' : (error.validationContext ?? 'body');
  // A value refused with its own message (validation.ts, x-unsupported) is reported with that message alone.
  const refused = new Set((error.validation ?? []).filter((v) => v.keyword === UNSUPPORTED_VALUES).map((v) => v.instancePath));
  const reported = (error.validation ?? []).filter((v) => v.keyword === UNSUPPORTED_VALUES || !refused.has(v.instancePath));
  return reported.map((v) => {
    const base = `${where}${v.instancePath.replace(/\//g, '.')}`;
    const params = v.params as Record<string, unknown>;
    if (typeof params.additionalProperty === 'string') return { path: `${base}.${params.additionalProperty}`, message: 'unknown property' };
    if (typeof params.missingProperty === 'string') return { path: `${base}.${params.missingProperty}`, message: 'is required' };
    if (Array.isArray(params.allowedValues)) return { path: base, message: `must be one of ${params.allowedValues.join(', ')}` };
    if (params.format === 'date-time') return { path: base, message: 'must be a date-time (RFC 3339) from 1970-01-01T00:00:00Z to 9998-12-31T23:59:59.999Z' };
    return { path: base, message: v.message ?? 'is invalid' };
  });
}

function frameworkRefusal(error: FastifyError): ErrorResponse | undefined {
  switch (error.code) {
    case 'FST_ERR_BAD_URL':
      return invalidRequest('path', 'is not a valid URL (malformed percent-escape)');
    case 'FST_ERR_MAX_PARAM_LENGTH':
      return invalidRequest('path', 'a path parameter is too long');
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return { status: 413, code: 'M2M_PAYLOAD_TOO_LARGE', message: 'request body is too large', details: {}, headers: { connection: 'close' } };
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
    case 'FST_ERR_CTP_INVALID_TYPE':
      return { status: 415, code: 'M2M_UNSUPPORTED_MEDIA_TYPE', message: 'send request bodies as application/json', details: {} };
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return invalidRequest('body', 'does not match the Content-Length header');
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return { status: 400, code: 'M2M_INVALID_REQUEST', message: 'body must not be empty when Content-Type is application/json', details: { issues: [{ path: 'body', message: 'is empty' }] } };
  }
  return undefined;
}

/** Maps anything thrown to the envelope; 5xx details are logged by the caller, never sent. */
export function toErrorResponse(error: FastifyError | DomainError | Error, requestId: string): ErrorResponse {
  if (error instanceof DomainError) return { status: statusOf[error.code], code: error.code, message: error.message, details: error.details };
  if (isDatabaseUnavailable(error)) {
    return {
      status: 503,
      code: 'M2M_UNAVAILABLE',
      message: 'the service is temporarily unavailable; retry after the Retry-After delay',
      details: { retryAfterSeconds: UNAVAILABLE_RETRY_AFTER_SECONDS, requestId },
      headers: { 'retry-after': UNAVAILABLE_RETRY_AFTER_SECONDS },
    };
  }
  const fe = error as FastifyError;
  if (fe.validation) return invalidIssues(issuesOf(fe));
  const refusal = frameworkRefusal(fe);
  if (refusal) return refusal;
  if (fe.statusCode && fe.statusCode >= 400 && fe.statusCode < 500) {
    const message = fe instanceof SyntaxError || fe.code === 'FST_ERR_CTP_INVALID_JSON_BODY' ? 'body is not valid JSON' : 'invalid request';
    return { status: 400, code: 'M2M_INVALID_REQUEST', message, details: { issues: [{ path: 'body', message }] } };
  }
  return { status: 500, code: 'M2M_INTERNAL_ERROR', message: 'internal error', details: { requestId } };
}

/** Sends the envelope for `error`; the error handler and Fastify's `frameworkErrors` both come here. */
export function sendError(error: FastifyError | Error, request: FastifyRequest, reply: FastifyReply): void {
  const response = toErrorResponse(error, request.id);
  if (response.status === 503) request.log.warn({ err: error }, 'database unavailable');
  else if (response.status >= 500) request.log.error({ err: error }, 'request failed');
  else request.log.info({ code: response.code, status: response.status }, response.message);
  closeIfBodyUnread(request, reply);
  // Framework refusals (bad URL, over-long parameter) arrive before the onRequest hooks that set this header.
  void reply
    .header('X-Request-Id', request.id)
    .headers(response.headers ?? {})
    .status(response.status)
    .send(errorBody(response.code, response.message, response.details));
}

/** The envelope as a raw HTTP/1.1 response, for refusals Node's parser makes before any request exists. */
function rawResponse(status: number, reason: string, code: ErrorCode, message: string): string {
  const requestId = newRequestId();
  const body = JSON.stringify(errorBody(code, message, { requestId }));
  return (
    `HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
    `X-Request-Id: ${requestId}\r\nConnection: close\r\n\r\n${body}`
  );
}

function clientRefusal(code: string | undefined): string {
  if (code === 'HPE_HEADER_OVERFLOW') return rawResponse(431, 'Request Header Fields Too Large', 'M2M_PAYLOAD_TOO_LARGE', 'request headers or URL are too large');
  if (code === 'ERR_HTTP_REQUEST_TIMEOUT') return rawResponse(408, 'Request Timeout', 'M2M_INVALID_REQUEST', 'the request was not received in time');
  return rawResponse(400, 'Bad Request', 'M2M_INVALID_REQUEST', 'malformed HTTP request');
}

/**
 * Node's `clientError` (Fastify's `clientErrorHandler`): the HTTP parser refused the bytes (header overflow →
 * 431, malformed → 400) or the request timed out (408). Answers the envelope unless a response is already
 * under way on the socket, then closes it.
 */
export function clientErrorHandler(error: Error & { code?: string }, socket: Socket): void {
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  const inFlight: unknown = Reflect.get(socket, '_httpMessage');
  const started = typeof inFlight === 'object' && inFlight !== null && Reflect.get(inFlight, 'headersSent') === true;
  if (!socket.writable || started) {
    socket.destroy();
    return;
  }
  socket.end(clientRefusal(error.code), () => socket.destroy());
  // A peer that never reads must not keep the socket.
  setTimeout(() => socket.destroy(), 1000).unref();
}
