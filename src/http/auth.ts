import type { FastifyReply, FastifyRequest } from 'fastify';
import { insufficientScope, type ApiKeyService, type Principal } from '../auth/keys.js';
import { refusedScopes, type ScopeMode } from '../auth/scopes.js';
import { DomainError } from '../errors.js';
import type { KeyRateLimit } from './rate-limit.js';

declare module 'fastify' {
  interface FastifyRequest {
    principal?: Principal;
  }
  interface FastifyContextConfig {
    /** Scopes the route requires; checked before the request is parsed or validated. */
    scopes?: string[];
    /** `any`: one of `scopes` is enough (the response is filtered by the scopes held). */
    scopeMode?: ScopeMode;
  }
}

/** The authenticated principal of a public API request (set by the auth hook). */
export function principalOf(request: FastifyRequest): Principal {
  if (!request.principal) throw new DomainError('M2M_AUTH_MISSING_CREDENTIALS', 'missing credentials');
  return request.principal;
}

/**
 * onRequest hook for the public API: bearer key → principal → rate limit → route scopes.
 * Runs before body parsing and validation, so a caller without access learns nothing about the input rules.
 */
export function authenticateHook(keys: ApiKeyService, limiter: KeyRateLimit) {
  return async (request: FastifyRequest, reply: FastifyReply): Promise<void> => {
    const header = request.headers.authorization;
    const match = typeof header === 'string' ? /^Bearer ([^\s]+)$/i.exec(header.trim()) : null;
    if (!match) {
      reply.header('WWW-Authenticate', 'Bearer realm="m2m"');
      throw new DomainError('M2M_AUTH_MISSING_CREDENTIALS', 'send the API key as "Authorization: Bearer <API_KEY>"');
    }
    const principal = await keys.authenticate(match[1]);
    if (!principal) {
      reply.header('WWW-Authenticate', 'Bearer realm="m2m", error="invalid_token"');
      throw new DomainError('M2M_AUTH_INVALID_CREDENTIALS', 'the API key is unknown, revoked or expired');
    }
    request.principal = principal;
    request.log = request.log.child({ tenantId: principal.tenantId, apiKeyId: principal.apiKeyId });

    const rate = await limiter.take(principal.apiKeyId);
    reply.header('RateLimit-Limit', rate.limit);
    reply.header('RateLimit-Remaining', rate.remaining);
    reply.header('RateLimit-Reset', rate.resetSeconds);
    if (!rate.allowed) {
      reply.header('Retry-After', rate.retryAfterSeconds);
      throw new DomainError('M2M_RATE_LIMITED', 'too many requests for this API key; retry after the Retry-After delay', {
        retryAfterSeconds: rate.retryAfterSeconds,
      });
    }

    const required = request.routeOptions.config.scopes ?? [];
    const missing = refusedScopes(principal.scopes, required, request.routeOptions.config.scopeMode);
    if (missing.length > 0) throw insufficientScope(required, missing);
  };
}
