import { Type, type Static, type TObject, type TSchema } from 'typebox';
import type { Ctx } from '../context.js';
import type { Scope, ScopeMode } from '../auth/scopes.js';
import { Strict } from '../http/schemas.js';
import type { IdempotencyKeyUse } from '../platform/idempotency.js';
import type { Services } from '../services.js';

/** MCP toolsets, one per area of the API (decisions 6.1). */
export const AREAS = ['conversations', 'messaging', 'reservations', 'crm', 'knowledge', 'webhooks', 'events'] as const;
export type Area = (typeof AREAS)[number];

/** The domain services the public catalogue's handlers call: an operation gets these, not the whole container. */
export type OperationServices = Pick<
  Services,
  'conversations' | 'conversationContent' | 'crawls' | 'crm' | 'events' | 'followUpSender' | 'knowledge' | 'knowledgeAssets' | 'messaging' | 'replies' | 'reservations' | 'webhooks'
>;

export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
export type SuccessStatus = 200 | 201 | 202 | 204;

/** The input of an operation without path parameters, query or body. */
export const NoInput = Type.Object({}, Strict);
/** The success body of an operation that answers 204. */
export const NoContent = Type.Null();

/**
 * How `Idempotency-Key` is honoured, always by the one protocol of src/platform/idempotency.ts, under the
 * operation's operationId. `service`: the service runs the key itself (a start or a send inside its own
 * transaction, a reply inside its statement) and receives it as `idempotency`. `create`: the catalogue runs the
 * handler under the key in the same transaction as the service's writes (every POST that creates).
 */
export interface Idempotency {
  key: 'required' | 'optional';
  by: 'service' | 'create';
}

type KeyInput<I> = I extends { key: 'required'; by: 'service' }
  ? { idempotency: IdempotencyKeyUse }
  : I extends { key: 'optional'; by: 'service' }
    ? { idempotency?: IdempotencyKeyUse }
    : unknown;

/** An operation's input: path parameters, query and body merged into one object (what an MCP tool takes). */
export type InputOf<P extends TObject, Q extends TObject, B extends TObject, I> = Static<P> & Static<Q> & Static<B> & KeyInput<I>;

/** A result whose body was stored under an Idempotency-Key; `replayed` sets the Idempotent-Replayed header. */
export class Replayable<T> {
  constructor(
    readonly body: T,
    readonly replayed: boolean,
  ) {}
}

/**
 * A result already written as JSON: `text` is exactly what the response schema's serializer would write for a
 * `T`, and is sent as it is. For bodies assembled from stored JSON (the event feed splices the stored event
 * bodies instead of parsing and serialising them again). `JSON.stringify` of it gives the same JSON.
 */
export class JsonText<T> {
  constructor(readonly text: string) {}

  value(): T {
    const parsed: T = JSON.parse(this.text);
    return parsed;
  }

  toJSON(): T {
    return this.value();
  }
}

/** A service's stored-or-fresh answer (`runIdempotent`) as a handler result. */
export function replayable<T>(result: { body: T; replayed: boolean }): Replayable<T> {
  return new Replayable(result.body, result.replayed);
}

/** What names and describes an operation, the same in its declaration and in what the surfaces read. */
export interface OperationIdentity {
  /** camelCase, unique; MCP tools are named from it in snake_case. */
  operationId: string;
  /** The SDK method, dotted by resource: `webhooks.deliveries.retry` → `client.webhooks.deliveries.retry(…)`. */
  sdk: string;
  method: HttpMethod;
  /** OpenAPI form, relative to /m2m/v1: `/webhooks/{subscriptionId}`. */
  path: string;
  area: Area;
  /** OpenAPI tag (the reference page's section). */
  tag: string;
  summary: string;
  /** Written for a developer and for a model choosing a tool: what it does, when to use it, what it never does. */
  description: string;
  scopes: readonly Scope[];
  status: SuccessStatus;
}

export interface OperationSpec<P extends TObject, Q extends TObject, B extends TObject, R extends TSchema, I extends Idempotency | undefined> extends OperationIdentity {
  /** `any`: one of `scopes` is enough, the service filters what it returns by the scopes held (default `all`). */
  scopeMode?: ScopeMode;
  params?: P;
  query?: Q;
  body?: B;
  response: R;
  /** Error statuses besides 400, 401, 403 and 429 (documented on every operation). */
  errors?: readonly number[];
  /** A request body example (operations with a body) and a response example. */
  examples: { request?: Static<B>; response?: Static<R> };
  /** Not in the spec's contract: an addition of ours (`x-extension`). */
  extension?: boolean;
  idempotency?: I;
  /** MCP hints. Reads are read-only; DELETE, revocations and sends are destructive. */
  hints?: { destructive?: boolean; idempotent?: boolean; openWorld?: boolean };
  bodyLimit?: number;
  handler: (services: OperationServices, ctx: Ctx, input: InputOf<P, Q, B, I>) => Promise<Static<R> | Replayable<Static<R>> | JsonText<Static<R>>>;
}

/** An operation as the surfaces see it (REST, OpenAPI, MCP, SDK generator): schemas always present. */
export interface Operation extends OperationIdentity {
  scopeMode: ScopeMode;
  params: TObject;
  query: TObject;
  body: TObject | undefined;
  response: TSchema;
  errors: readonly number[];
  examples: { request?: unknown; response?: unknown };
  extension: boolean;
  idempotency: Idempotency | undefined;
  readOnly: boolean;
  destructive: boolean;
  idempotent: boolean;
  openWorld: boolean;
  bodyLimit: number | undefined;
  run(services: OperationServices, ctx: Ctx, input: Record<string, unknown>): Promise<unknown>;
}

/**
 * Declares one public operation. Everything a surface needs is here once; `handler` receives the validated,
 * merged input typed from the schemas and calls one service method.
 */
export function defineOperation<
  P extends TObject = typeof NoInput,
  Q extends TObject = typeof NoInput,
  B extends TObject = typeof NoInput,
  R extends TSchema = TSchema,
  I extends Idempotency | undefined = undefined,
>(spec: OperationSpec<P, Q, B, R, I>): Operation {
  const readOnly = spec.method === 'GET';
  return {
    operationId: spec.operationId,
    sdk: spec.sdk,
    method: spec.method,
    path: spec.path,
    area: spec.area,
    tag: spec.tag,
    summary: spec.summary,
    description: spec.description,
    scopes: spec.scopes,
    scopeMode: spec.scopeMode ?? 'all',
    params: spec.params ?? NoInput,
    query: spec.query ?? NoInput,
    body: spec.body,
    status: spec.status,
    response: spec.response,
    errors: spec.errors ?? [],
    examples: spec.examples,
    extension: spec.extension ?? false,
    idempotency: spec.idempotency,
    readOnly,
    destructive: spec.hints?.destructive ?? spec.method === 'DELETE',
    idempotent: spec.hints?.idempotent ?? (readOnly || spec.method === 'PUT' || spec.method === 'DELETE'),
    openWorld: spec.hints?.openWorld ?? false,
    bodyLimit: spec.bodyLimit,
    // The surfaces validate `input` against params, query and body before calling run (Ajv, the same schemas).
    run: (services, ctx, input) => spec.handler(services, ctx, input as InputOf<P, Q, B, I>),
  };
}
