import { Type, type Static, type TObject, type TSchema } from 'typebox';
import type { Ctx } from '../context.js';
import type { JsonText } from '../platform/json-text.js';
import type { Scope, ScopeMode } from '../auth/scopes.js';
import type { ErrorCode } from '../errors.js';
import { Strict } from '../http/schemas.js';
import type { IdempotencyKeyUse } from '../platform/idempotency.js';

/** MCP toolsets, one per area of the API (decisions 6.1). */
export const AREAS = ['conversations', 'messaging', 'reservations', 'crm', 'knowledge', 'webhooks', 'events', 'channels', 'contacts'] as const;
export type Area = (typeof AREAS)[number];

/**
 * Who an operation is for. `public`: /m2m/v1, an API key and its scopes; REST, the public OpenAPI, MCP and the
 * SDK. `admin`: /admin/v1, the admin token; REST and the admin OpenAPI only.
 */
export type Surface = 'public' | 'admin';

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

/** A service's stored-or-fresh answer (`runIdempotent`) as a handler result. */
export function replayable<T>(result: { body: T; replayed: boolean }): Replayable<T> {
  return new Replayable(result.body, result.replayed);
}

/**
 * An error an operation answers for a cause of its own, documented on the reference page as a real example:
 * the code, the `details.reason` when it sets one, and the message (and other details) it answers with.
 */
export interface KnownError {
  status: number;
  code: ErrorCode;
  reason?: string;
  message: string;
  details?: Record<string, unknown>;
}

/** What every operation has, whatever its surface. */
interface OperationShape {
  /** camelCase, unique within its surface (each surface is one OpenAPI document); MCP tools are named from it. */
  operationId: string;
  method: HttpMethod;
  /** OpenAPI form, relative to the surface's prefix (/m2m/v1 or /admin/v1): `/webhooks/{subscriptionId}`. */
  path: string;
  summary: string;
  status: SuccessStatus;
}

/** What names and describes a public operation, the same in its declaration and in what the surfaces read. */
export interface OperationIdentity extends OperationShape {
  /** The SDK method, dotted by resource: `webhooks.deliveries.retry` → `client.webhooks.deliveries.retry(…)`. */
  sdk: string;
  area: Area;
  /** OpenAPI tag (the reference page's section). */
  tag: string;
  /** Written for a developer and for a model choosing a tool: what it does, when to use it, what it never does. */
  description: string;
  scopes: readonly Scope[];
}

/**
 * A public operation's declaration. `S` is what its handler needs of the services (inferred from the
 * handler's first parameter), so the catalogue depends on no container of every service.
 */
export interface OperationSpec<S, P extends TObject, Q extends TObject, B extends TObject, R extends TSchema, I extends Idempotency | undefined> extends OperationIdentity {
  surface?: 'public';
  /** `any`: one of `scopes` is enough, the service filters what it returns by the scopes held (default `all`). */
  scopeMode?: ScopeMode;
  params?: P;
  query?: Q;
  body?: B;
  response: R;
  /** Other success statuses the handler may answer (with `WithStatus`, as an upsert that created: 201); same body schema. */
  alsoStatus?: readonly SuccessStatus[];
  /**
   * Error statuses besides 400, 401, 403 and 429 (documented on every operation), and the errors of its own
   * causes (each one documents its status too).
   */
  errors?: readonly (number | KnownError)[];
  /** A request body example (operations with a body) and a response example. */
  examples: { request?: Static<B>; response?: Static<R> };
  /** Not in the spec's contract: an addition of ours (`x-extension`). */
  extension?: boolean;
  /** More vendor fields of the OpenAPI operation (`x-event-scopes`). */
  documentExtras?: Readonly<Record<`x-${string}`, unknown>>;
  idempotency?: I;
  /** MCP hints. Reads are read-only (a POST that only reads, such as a search, says so); DELETE, revocations and sends are destructive. */
  hints?: { readOnly?: boolean; destructive?: boolean; idempotent?: boolean; openWorld?: boolean };
  bodyLimit?: number;
  handler: (services: S, ctx: Ctx, input: InputOf<P, Q, B, I>) => Promise<Static<R> | Replayable<Static<R>> | JsonText<Static<R>> | WithStatus<Static<R>>>;
}

/** An admin handler's input: path parameters (but the tenant, which is `ctx.tenantId`), query and body merged. */
export type AdminInput<P extends TObject, Q extends TObject, B extends TObject> = Omit<Static<P>, 'tenantId'> & Static<Q> & Static<B>;

/**
 * Raw bytes answered as they are (a media download), not JSON: REST sends them with their Content-Type,
 * Content-Length and `Content-Disposition: attachment`; MCP answers a description with the bytes in base64 when
 * they are small (src/mcp/routes.ts); the SDK method returns them as a Uint8Array. Declare the operation's
 * response as `BinaryResponse`.
 */
export class BinaryBody {
  constructor(
    readonly bytes: Buffer,
    readonly contentType: string,
    readonly filename: string,
  ) {}
}

/** The response schema of an operation that answers `BinaryBody`: bytes of the content's own type. */
export const BinaryResponse = Type.Unsafe<BinaryBody>({ type: 'string', format: 'binary', description: 'The bytes, with their own Content-Type' });

/** What an MCP tool answers for raw bytes: their description, and the bytes in base64 when small (src/mcp/routes.ts). */
export const BinaryToolOutput = Type.Object(
  {
    contentType: Type.String(),
    sizeBytes: Type.Integer({ minimum: 0 }),
    filename: Type.String(),
    contentBase64: Type.Optional(Type.String({ description: 'The bytes, when at most 1 MiB' })),
    note: Type.Optional(Type.String({ description: 'Why the bytes are not inlined, and where to get them' })),
  },
  { additionalProperties: false },
);

/** A result answered with a status other than the operation's default one (a sync that created: 201). */
export class WithStatus<T> {
  constructor(
    readonly status: SuccessStatus,
    readonly body: T,
  ) {}
}

/**
 * An admin operation's declaration: no scopes (the admin token covers all), no MCP tool, no SDK method, not in
 * the public document. A `{tenantId}` in the path is the tenant acted for, checked to exist before the handler.
 */
export interface AdminOperationSpec<S, P extends TObject, Q extends TObject, B extends TObject, R extends TSchema> extends OperationShape {
  surface: 'admin';
  params?: P;
  query?: Q;
  body?: B;
  /** Other success statuses the handler may answer (with `WithStatus`); same body schema. */
  alsoStatus?: readonly SuccessStatus[];
  response: R;
  /** Error statuses besides 400, 401, 403 and 429. */
  errors?: readonly number[];
  bodyLimit?: number;
  /** `ctx.actor` is the admin; `ctx.tenantId` the path's tenant, '' above tenants (POST /tenants). */
  handler: (services: S, ctx: Ctx, input: AdminInput<P, Q, B>) => Promise<Static<R> | WithStatus<Static<R>>>;
}

/** What the surfaces read of any operation: schemas always present. */
interface DeclaredOperation<S> extends OperationShape {
  params: TObject;
  query: TObject;
  body: TObject | undefined;
  response: TSchema;
  /** Every success status it may answer, `status` first. */
  statuses: readonly SuccessStatus[];
  errors: readonly number[];
  bodyLimit: number | undefined;
  /** `input` is validated already against params, query and body. */
  run: (services: S, ctx: Ctx, input: Record<string, unknown>) => Promise<unknown>;
}

/**
 * A public operation as the surfaces see it (REST, OpenAPI, MCP, SDK generator). `S` is the services it runs
 * with; `Operation` alone (S = never) is any operation, for readers that never run one.
 */
export interface Operation<S = never> extends OperationIdentity, DeclaredOperation<S> {
  surface: 'public';
  /** The errors of its own causes, as declared (their statuses are in `errors`). */
  knownErrors: readonly KnownError[];
  scopeMode: ScopeMode;
  examples: { request?: unknown; response?: unknown };
  extension: boolean;
  documentExtras: Readonly<Record<`x-${string}`, unknown>>;
  idempotency: Idempotency | undefined;
  readOnly: boolean;
  destructive: boolean;
  idempotent: boolean;
  openWorld: boolean;
  /** Answers raw bytes (`BinaryBody`), not JSON. */
  binary: boolean;
}

/** An admin operation as the admin routes and the admin document see it. */
export interface AdminOperation<S = never> extends DeclaredOperation<S> {
  surface: 'admin';
}

/** Any entry of the catalogue. */
export type CatalogueOperation<S = never> = Operation<S> | AdminOperation<S>;

/**
 * Declares one operation of either surface. Everything a surface needs is here once; `handler` receives the
 * validated, merged input typed from the schemas and calls one service method.
 */
export function defineOperation<S, P extends TObject = typeof NoInput, Q extends TObject = typeof NoInput, B extends TObject = typeof NoInput, R extends TSchema = TSchema>(
  spec: AdminOperationSpec<S, P, Q, B, R>,
): AdminOperation<S>;
export function defineOperation<
  S,
  P extends TObject = typeof NoInput,
  Q extends TObject = typeof NoInput,
  B extends TObject = typeof NoInput,
  R extends TSchema = TSchema,
  I extends Idempotency | undefined = undefined,
>(spec: OperationSpec<S, P, Q, B, R, I>): Operation<S>;
export function defineOperation<S, P extends TObject, Q extends TObject, B extends TObject, R extends TSchema, I extends Idempotency | undefined>(
  spec: AdminOperationSpec<S, P, Q, B, R> | OperationSpec<S, P, Q, B, R, I>,
): CatalogueOperation<S> {
  const shape = {
    operationId: spec.operationId,
    method: spec.method,
    path: spec.path,
    summary: spec.summary,
    params: spec.params ?? NoInput,
    query: spec.query ?? NoInput,
    body: spec.body,
    status: spec.status,
    response: spec.response,
    bodyLimit: spec.bodyLimit,
  };
  if (spec.surface === 'admin') {
    const handler = spec.handler;
    return {
      ...shape,
      surface: 'admin',
      errors: spec.errors ?? [],
      statuses: [spec.status, ...(spec.alsoStatus ?? [])],
      // The admin routes validate `input` against params, query and body, and take the tenant out of it, before calling run.
      run: (services, ctx, input) => handler(services, ctx, input as AdminInput<P, Q, B>),
    };
  }
  const handler = spec.handler;
  const readOnly = spec.hints?.readOnly ?? spec.method === 'GET';
  const declared = spec.errors ?? [];
  const knownErrors = declared.filter((error): error is KnownError => typeof error !== 'number');
  const statuses = declared.map((error) => (typeof error === 'number' ? error : error.status));
  return {
    ...shape,
    errors: [...new Set(statuses)],
    knownErrors,
    surface: 'public',
    statuses: [spec.status, ...(spec.alsoStatus ?? [])],
    sdk: spec.sdk,
    area: spec.area,
    tag: spec.tag,
    description: spec.description,
    scopes: spec.scopes,
    scopeMode: spec.scopeMode ?? 'all',
    examples: spec.examples,
    extension: spec.extension ?? false,
    documentExtras: spec.documentExtras ?? {},
    idempotency: spec.idempotency,
    readOnly,
    destructive: spec.hints?.destructive ?? spec.method === 'DELETE',
    idempotent: spec.hints?.idempotent ?? (readOnly || spec.method === 'PUT' || spec.method === 'DELETE'),
    openWorld: spec.hints?.openWorld ?? false,
    binary: Object.is(spec.response, BinaryResponse),
    // The surfaces validate `input` against params, query and body before calling run (Ajv, the same schemas).
    run: (services, ctx, input) => handler(services, ctx, input as InputOf<P, Q, B, I>),
  };
}
