import { conversationOperations } from '../conversations/operations.js';
import { conversationContentOperations } from '../conversations/message-operations.js';
import { crmOperations } from '../crm/operations.js';
import { eventOperations } from '../events/operations.js';
import { crawlOperations } from '../knowledge/crawler/operations.js';
import { knowledgeOperations } from '../knowledge/operations.js';
import { messagingOperations } from '../messaging/operations.js';
import { reservationOperations } from '../reservations/operations.js';
import { webhookOperations } from '../webhooks/operations.js';
import type { Operation } from './define.js';

/** Every public operation of /m2m/v1. REST routes, OpenAPI, MCP tools and the SDK are loops over this list. */
export const OPERATIONS: readonly Operation[] = checkCatalogue([
  ...webhookOperations,
  ...eventOperations,
  ...conversationOperations,
  ...conversationContentOperations,
  ...messagingOperations,
  ...reservationOperations,
  ...crmOperations,
  ...knowledgeOperations,
  ...crawlOperations,
]);

/** `listKnowledgeItems` → `list_knowledge_items` */
export function toolName(operationId: string): string {
  return operationId.replace(/[A-Z]/g, (letter) => `_${letter.toLowerCase()}`);
}

/** The merged input of a tool must not have two meanings for one name; operationIds are unique camelCase. */
function checkCatalogue(operations: Operation[]): Operation[] {
  const ids = new Set<string>();
  for (const operation of operations) {
    if (!/^[a-z][A-Za-z0-9]*$/.test(operation.operationId)) throw new Error(`operationId ${operation.operationId} is not camelCase`);
    if (ids.has(operation.operationId)) throw new Error(`operationId ${operation.operationId} is declared twice`);
    ids.add(operation.operationId);
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
