import { provisioningAdminOperations } from '../admin/operations.js';
import { channelOperations } from '../channels/operations.js';
import { conversationAdminOperations } from '../conversations/admin-operations.js';
import { conversationOperations } from '../conversations/operations.js';
import { contactOperations } from '../conversations/contact-operations.js';
import { handoffOperations } from '../conversations/handoff-operations.js';
import { conversationContentOperations } from '../conversations/message-operations.js';
import { crmAdminOperations } from '../crm/admin-operations.js';
import { crmOperations } from '../crm/operations.js';
import { salesOperations } from '../crm/sales-operations.js';
import { eventOperations } from '../events/operations.js';
import { crawlOperations } from '../knowledge/crawler/operations.js';
import { knowledgeAdminOperations } from '../knowledge/admin-operations.js';
import { knowledgeOperations } from '../knowledge/operations.js';
import { messagingAdminOperations } from '../messaging/admin-operations.js';
import { messagingOperations } from '../messaging/operations.js';
import { reservationAdminOperations } from '../reservations/admin-operations.js';
import { reservationOperations } from '../reservations/operations.js';
import { reservationHistoryOperations } from '../reservations/history-operations.js';
import { webhookOperations } from '../webhooks/operations.js';
import type { AdminOperation, CatalogueOperation, Operation, Surface } from './define.js';

const ENTRIES = [
  ...webhookOperations,
  ...eventOperations,
  ...conversationOperations,
  ...conversationContentOperations,
  ...handoffOperations,
  ...messagingOperations,
  ...channelOperations,
  ...contactOperations,
  ...reservationOperations,
  ...reservationHistoryOperations,
  ...crmOperations,
  ...salesOperations,
  ...knowledgeOperations,
  ...crawlOperations,
  ...provisioningAdminOperations,
  ...conversationAdminOperations,
  ...messagingAdminOperations,
  ...crmAdminOperations,
  ...reservationAdminOperations,
  ...knowledgeAdminOperations,
];

/** What the operations of `T` need together: each declares only its own services, the catalogue all of them. */
type NeedsOf<T> = (T extends CatalogueOperation<infer S> ? (services: S) => void : never) extends (services: infer All) => void ? All : never;

/** The services the whole catalogue runs with (the container satisfies it; nothing here imports it). */
export type CatalogueServices = NeedsOf<(typeof ENTRIES)[number]>;

/** Every operation of both surfaces, each declared once. The lists below are views of it, by surface. */
export const CATALOGUE: readonly CatalogueOperation<CatalogueServices>[] = checkCatalogue(ENTRIES);

/** Every public operation of /m2m/v1. REST routes, OpenAPI, MCP tools and the SDK are loops over this list. */
export const OPERATIONS: readonly Operation<CatalogueServices>[] = CATALOGUE.filter((operation) => operation.surface === 'public');

/** Every operation of /admin/v1 but the activity stream. Its routes and the admin document are loops over this list. */
export const ADMIN_OPERATIONS: readonly AdminOperation<CatalogueServices>[] = CATALOGUE.filter((operation) => operation.surface === 'admin');

/** `listKnowledgeItems` → `list_knowledge_items` */
export function toolName(operationId: string): string {
  return operationId.replace(/[A-Z]/g, (letter) => `_${letter.toLowerCase()}`);
}

/**
 * An operationId names one operation of its surface's document, and one route is one operation. The merged
 * input of a public operation (an MCP tool's arguments) must not have two meanings for one name.
 */
function checkCatalogue<T extends CatalogueOperation<never>>(operations: T[]): T[] {
  const seen: Record<Surface, { ids: Set<string>; routes: Set<string> }> = {
    public: { ids: new Set(), routes: new Set() },
    admin: { ids: new Set(), routes: new Set() },
  };
  for (const operation of operations) {
    const { ids, routes } = seen[operation.surface];
    const route = `${operation.method} ${operation.path}`;
    if (!/^[a-z][A-Za-z0-9]*$/.test(operation.operationId)) throw new Error(`${operation.surface} operationId ${operation.operationId} is not camelCase`);
    if (ids.has(operation.operationId) || routes.has(route)) throw new Error(`${operation.surface} operation ${operation.operationId} (${route}) is declared twice`);
    ids.add(operation.operationId);
    routes.add(route);
    if (operation.surface !== 'public') continue;
    const names = new Set<string>();
    for (const part of [operation.params, operation.query, operation.body]) {
      for (const name of Object.keys(part?.properties ?? {})) {
        if (names.has(name) || name === 'idempotencyKey') throw new Error(`${operation.operationId}: input field ${name} appears twice`);
        names.add(name);
      }
    }
  }
  return operations;
}
