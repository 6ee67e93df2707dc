/** Domain errors carry the public error code; the HTTP layer maps codes to statuses in one place. */

export type ErrorCode =
  | 'M2M_AUTH_MISSING_CREDENTIALS'
  | 'M2M_AUTH_INVALID_CREDENTIALS'
  | 'M2M_AUTH_INSUFFICIENT_SCOPE'
  | 'M2M_INVALID_REQUEST'
  | 'M2M_INVALID_CURSOR'
  | 'M2M_NOT_FOUND'
  | 'M2M_CONFLICT'
  | 'M2M_IDEMPOTENCY_CONFLICT'
  | 'M2M_RATE_LIMITED'
  | 'M2M_PAYLOAD_TOO_LARGE'
  | 'M2M_UNSUPPORTED_MEDIA_TYPE'
  | 'M2M_INTERNAL_ERROR'
  | 'M2M_UNAVAILABLE';

export const statusOf: Record<ErrorCode, number> = {
  M2M_AUTH_MISSING_CREDENTIALS: 401,
  M2M_AUTH_INVALID_CREDENTIALS: 401,
  M2M_AUTH_INSUFFICIENT_SCOPE: 403,
  M2M_INVALID_REQUEST: 400,
  M2M_INVALID_CURSOR: 400,
  M2M_NOT_FOUND: 404,
  M2M_CONFLICT: 409,
  M2M_IDEMPOTENCY_CONFLICT: 409,
  M2M_RATE_LIMITED: 429,
  M2M_PAYLOAD_TOO_LARGE: 413,
  M2M_UNSUPPORTED_MEDIA_TYPE: 415,
  M2M_INTERNAL_ERROR: 500,
  M2M_UNAVAILABLE: 503,
};

export interface Issue {
  path: string;
  message: string;
}

export class DomainError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details: Record<string, unknown> = {},
  ) {
    super(message);
    this.name = 'DomainError';
  }
}

export function notFound(what: string): DomainError {
  return new DomainError('M2M_NOT_FOUND', `${what} not found`);
}

export function invalid(path: string, message: string): DomainError {
  return new DomainError('M2M_INVALID_REQUEST', `${path}: ${message}`, { issues: [{ path, message }] satisfies Issue[] });
}

export function conflict(message: string, details: Record<string, unknown> = {}): DomainError {
  return new DomainError('M2M_CONFLICT', message, details);
}

export function errorBody(code: ErrorCode, message: string, details: Record<string, unknown> = {}) {
  return { error: { code, message, details } };
}
