import { type Static, type TObject, type TSchema } from 'typebox';
import type { Ctx } from '../context.js';
import { NoInput, type HttpMethod, type SuccessStatus } from '../operations/define.js';
import type { Services } from '../services.js';

/** The services the admin catalogue's handlers call (provisioning and the outside world), not the whole container. */
export type AdminServices = Pick<
  Services,
  'apiKeys' | 'channels' | 'crawls' | 'crm' | 'inbox' | 'knowledge' | 'knowledgeAssets' | 'messaging' | 'reservations' | 'tenants' | 'webhooks'
>;

/** A result answered with a status other than the operation's default one (a sync that created: 201). */
export class WithStatus<T> {
  constructor(
    readonly status: SuccessStatus,
    readonly body: T,
  ) {}
}

/** The handler's input: path parameters (but the tenant, which is `ctx.tenantId`), query and body merged. */
export type AdminInput<P extends TObject, Q extends TObject, B extends TObject> = Omit<Static<P>, 'tenantId'> & Static<Q> & Static<B>;

export interface AdminOperationSpec<P extends TObject, Q extends TObject, B extends TObject, R extends TSchema> {
  /** camelCase, unique within the admin catalogue. */
  operationId: string;
  method: HttpMethod;
  /** OpenAPI form, relative to /admin/v1: `/tenants/{tenantId}/leads`. A `{tenantId}` is the tenant acted for. */
  path: string;
  summary: string;
  params?: P;
  query?: Q;
  body?: B;
  status: SuccessStatus;
  /** Other success statuses the handler may answer (with `WithStatus`); same body schema. */
  alsoStatus?: readonly SuccessStatus[];
  response: R;
  /** Error statuses besides 400, 401, 403 and 429. */
  errors?: readonly number[];
  bodyLimit?: number;
  /** `ctx.tenantId` is the path's tenant, checked to exist before the handler runs; '' above tenants (POST /tenants). */
  handler: (services: AdminServices, ctx: Ctx, input: AdminInput<P, Q, B>) => Promise<Static<R> | WithStatus<Static<R>>>;
}

/** An admin operation as the route loop and the admin document see it. */
export interface AdminOperation {
  operationId: string;
  method: HttpMethod;
  path: string;
  summary: string;
  params: TObject;
  query: TObject;
  body: TObject | undefined;
  status: SuccessStatus;
  statuses: readonly SuccessStatus[];
  response: TSchema;
  errors: readonly number[];
  bodyLimit: number | undefined;
  run(services: AdminServices, ctx: Ctx, input: Record<string, unknown>): Promise<unknown>;
}

/**
 * Declares one admin operation: no scopes (the admin token covers all), no MCP tool or SDK method, and
 * not in the public document. `handler` receives the validated, merged input and calls one service method.
 */
export function defineAdminOperation<P extends TObject = typeof NoInput, Q extends TObject = typeof NoInput, B extends TObject = typeof NoInput, R extends TSchema = TSchema>(
  spec: AdminOperationSpec<P, Q, B, R>,
): AdminOperation {
  return {
    operationId: spec.operationId,
    method: spec.method,
    path: spec.path,
    summary: spec.summary,
    params: spec.params ?? NoInput,
    query: spec.query ?? NoInput,
    body: spec.body,
    status: spec.status,
    statuses: [spec.status, ...(spec.alsoStatus ?? [])],
    response: spec.response,
    errors: spec.errors ?? [],
    bodyLimit: spec.bodyLimit,
    // The route loop validates `input` against params, query and body, and takes the tenant out of it, before calling run (Ajv, the same schemas).
    run: (services, ctx, input) => spec.handler(services, ctx, input as AdminInput<P, Q, B>),
  };
}
