import { conversationAdminOperations } from '../conversations/admin-operations.js';
import { crmAdminOperations } from '../crm/admin-operations.js';
import { knowledgeAdminOperations } from '../knowledge/admin-operations.js';
import { messagingAdminOperations } from '../messaging/admin-operations.js';
import { reservationAdminOperations } from '../reservations/admin-operations.js';
import type { AdminOperation } from './define.js';
import { provisioningAdminOperations } from './operations.js';

/** Every operation of /admin/v1 but the activity stream. Its routes and the admin document are loops over this list. */
export const ADMIN_OPERATIONS: readonly AdminOperation[] = checkAdminCatalogue([
  ...provisioningAdminOperations,
  ...conversationAdminOperations,
  ...messagingAdminOperations,
  ...crmAdminOperations,
  ...reservationAdminOperations,
  ...knowledgeAdminOperations,
]);

function checkAdminCatalogue(operations: AdminOperation[]): AdminOperation[] {
  const ids = new Set<string>();
  const routes = new Set<string>();
  for (const operation of operations) {
    if (!/^[a-z][A-Za-z0-9]*$/.test(operation.operationId)) throw new Error(`admin operationId ${operation.operationId} is not camelCase`);
    const route = `${operation.method} ${operation.path}`;
    if (ids.has(operation.operationId) || routes.has(route)) throw new Error(`admin operation ${operation.operationId} (${route}) is declared twice`);
    ids.add(operation.operationId);
    routes.add(route);
  }
  return operations;
}
