import { ALL_SCOPES } from '../auth/scopes.js';
import { statusOf, type ErrorCode } from '../errors.js';
import { EVENT_DEFINITIONS, EVENT_TYPES } from '../events/types.js';

/** What each error code means to a caller: when it is answered and what to do about it. */
const CODE_MEANINGS: Record<ErrorCode, string> = {
  M2M_AUTH_MISSING_CREDENTIALS: 'no `Authorization: Bearer <API_KEY>` header, or a malformed one (`WWW-Authenticate: Bearer` is sent)',
  M2M_AUTH_INVALID_CREDENTIALS: 'the key is unknown, revoked or expired',
  M2M_AUTH_INSUFFICIENT_SCOPE: 'the key lacks a scope the operation needs; `details.requiredScopes` and `details.missingScopes` name them',
  M2M_INVALID_REQUEST: 'the input breaks a rule; `details.issues` lists `{path, message}` (`body.url`, `query.limit`, `path.conversationId`), and `details.reason` names a refusal of the business rules (`channel_unavailable`, `template_not_prepared`)',
  M2M_INVALID_CURSOR: 'the cursor was changed, comes from another list, or is sent with other filters',
  M2M_NOT_FOUND: "the resource does not exist or belongs to another business (the two are indistinguishable)",
  M2M_CONFLICT: 'the resource is not in a state that allows the action; `details.reason` says why when the cause can be fixed by the caller (`recipient_opted_out`, `outside_customer_service_window`)',
  M2M_IDEMPOTENCY_CONFLICT: 'the `Idempotency-Key` was used with a different request, or its first request is still running',
  M2M_RATE_LIMITED: 'the key spent its request budget; wait `Retry-After` seconds (`details.retryAfterSeconds`)',
  M2M_PAYLOAD_TOO_LARGE: 'the request body is over the operation’s limit',
  M2M_UNSUPPORTED_MEDIA_TYPE: 'a body was sent with a content type other than `application/json`',
  M2M_INTERNAL_ERROR: 'a fault of ours; `details.requestId` names it for support (no stack trace is ever sent)',
  M2M_UNAVAILABLE: 'the database or another dependency is unreachable for now; retry after `Retry-After` seconds',
};

function codeCatalogue(): string {
  const codes = Object.keys(CODE_MEANINGS).filter((code): code is ErrorCode => Object.hasOwn(statusOf, code));
  return ['| Status | Code | When |', '|---|---|---|', ...codes.map((code) => `| ${statusOf[code]} | \`${code}\` | ${CODE_MEANINGS[code]} |`)].join('\n');
}

function scopeList(): string {
  return ALL_SCOPES.map((scope) => `\`${scope}\``).join(', ');
}

function eventTable(): string {
  return ['| Event type | Read scope | Meaning |', '|---|---|---|', ...EVENT_TYPES.map((type) => `| \`${type}\` | \`${EVENT_DEFINITIONS[type].scope}\` | ${EVENT_DEFINITIONS[type].description} |`)].join('\n');
}

/**
 * The reference page's introduction (`info.description`, CommonMark): what a developer holding only an API key
 * needs before the first call. Lists are generated from the code that enforces them (scopes, error codes,
 * event types), so the page cannot drift from the server.
 */
export function introduction(): string {
  return `Server-to-server API of one business (a *tenant*): conversations and messages with guests, CRM follow-ups,
reservations mirrored from the PMS, the knowledge the AI answers from, and webhooks. Every path below is relative
to \`/m2m/v1\`. An MCP server for agents offers the same operations as tools at \`POST /m2m/v1/mcp\`.

## Authentication

Send an API key on every request: \`Authorization: Bearer m2m_live_…\`. A key belongs to one business (there is no
tenant parameter) and is shown once when created, in the dashboard or by the admin API (\`m2m dev\` prints one for a
local server). Keys start with the visible prefix \`m2m_live_\`, so a leaked key can be recognised. A missing or
malformed header is **401** \`M2M_AUTH_MISSING_CREDENTIALS\`; an unknown, revoked or expired key is **401**
\`M2M_AUTH_INVALID_CREDENTIALS\`.

## Scopes

Each operation needs the scopes shown in its description (and in \`x-scopes\`); a key lacking one gets **403**
\`M2M_AUTH_INSUFFICIENT_SCOPE\` with \`details.requiredScopes\` and \`details.missingScopes\`. A \`:write\` scope
implies the matching \`:read\` scope (\`webhooks:write\` covers \`webhooks:read\`). New scopes are never granted to
existing keys by themselves. The scopes: ${scopeList()}.

## Errors

Every 4xx and 5xx answer has one shape, and every answer carries \`X-Request-Id\` (send your own, 1–128 characters
\`[A-Za-z0-9._:-]\`, to trace a call):

\`\`\`json
{ "error": { "code": "M2M_CONFLICT", "message": "the contact has opted out", "details": { "reason": "recipient_opted_out" } } }
\`\`\`

Branch on \`code\` (and \`details.reason\` where the operation documents one), never on \`message\`. Each operation
lists its own errors with real examples. Checks run in this order: authentication (401), rate limit (429), scope
(403), then input (400, 413, 415), then the operation itself (404, 409).

${codeCatalogue()}

Unknown query or body properties are **400** naming them (\`query.foo: unknown property\`), never ignored. A
resource of another business answers **404** exactly like a missing one.

## Idempotency

Operations that send or create take an \`Idempotency-Key\` header (1–255 characters; required on
\`POST /conversations/start\` and replies, optional elsewhere, as each operation says). Use one new key per action
and the same key for every retry of it. The first answer is stored for 24 hours per key and business: a retry with
the same body replays it with \`Idempotent-Replayed: true\`; the same key with a different body is **409**
\`M2M_IDEMPOTENCY_CONFLICT\`, and so is a retry that arrives while the first request is still running (retry it a
moment later). Refused requests store nothing, so a corrected retry may reuse the key. The SDK (\`@m2m/client\`)
sets and reuses keys itself.

## Pagination

Lists answer a page and, while there is more, a \`nextCursor\` (\`hasMore: true\`). Send it back as \`cursor\` with
the same filters and \`limit\` to get the next page. Cursors are opaque (at most 400 characters), signed and bound
to the list and its filters: a changed cursor or other filters are **400** \`M2M_INVALID_CURSOR\`. Pages stay
stable while rows are added. \`GET /events\` always answers a \`nextCursor\`: store it to read only newer events.

## Rate limits

Each key has a token bucket (by default 20 requests per second with bursts of 100). Every answer carries
\`RateLimit-Limit\`, \`RateLimit-Remaining\` and \`RateLimit-Reset\` (seconds until the bucket is full). Over the
limit: **429** \`M2M_RATE_LIMITED\` with \`Retry-After\` (seconds). A **503** \`M2M_UNAVAILABLE\` also carries
\`Retry-After\`.

## Versioning

\`/m2m/v1\` is the major version; this document is version 1.0.0. Within v1, operations, fields, event types and
error reasons may be added, never removed or changed in meaning: ignore fields you do not know. Operations marked
\`x-extension\` are additions to the published contract. Event envelopes carry \`schemaVersion\` (\`1.0\`).

## Webhooks

A subscription (\`POST /webhooks\`) receives a signed \`POST\` of each event to a public HTTPS URL (port 443). The
body is the event envelope \`{eventId, type, schemaVersion, tenantId, occurredAt, data}\`; the *Webhooks* section at
the end of this page has every type's payload schema, and \`GET /webhooks/event-types\` answers the same schemas.
A key receives only the events its scopes can read:

${eventTable()}

Each delivery carries \`X-Service-Event-Id\` and \`X-Service-Signature: t=<unix seconds>,v1=<hex>\`, where \`v1\` is
the lowercase hex HMAC-SHA256, keyed with the subscription's secret (\`whsec_…\`, its UTF-8 bytes), of the
timestamp, a \`.\` and the raw body bytes. Verify before parsing JSON:

\`\`\`js
import { createHmac, timingSafeEqual } from 'node:crypto';
function verify(secret, header, rawBody) {
  const { t, v1 } = Object.fromEntries(header.split(',').map((part) => part.split('=')));
  const expected = createHmac('sha256', secret).update(\`\${t}.\`).update(rawBody).digest('hex');
  const fresh = Math.abs(Date.now() / 1000 - Number(t)) <= 300;
  return fresh && v1?.length === 64 && timingSafeEqual(Buffer.from(v1), Buffer.from(expected));
}
\`\`\`

For example, secret \`whsec_x\`, timestamp \`1700000000\` and an empty body sign as
\`t=1700000000,v1=841bbb970af089f6550c05982b199562655b425e53140a47fe7871362131f178\`. Reject timestamps more than
five minutes away, compare in constant time, answer any 2xx once the event is stored, and deduplicate on
\`eventId\`: delivery is at least once, in no guaranteed order. A failed delivery is retried 6 times (after 1 min,
5 min, 30 min, 2 h, 8 h and 24 h); missed events can be read from \`GET /events\` or recovered with
\`POST /webhooks/{subscriptionId}/recover\`.`;
}
