import type { Tx } from '../db/driver.js';
import { enqueue } from '../jobs/queue.js';
import type { TaskName } from '../jobs/tasks.js';

export const RECEIPT_TASK = 'messaging.receipt' satisfies TaskName;

/**
 * Queues the channel's read receipt for the conversation's newest inbound message (with `typing`, the typing
 * indicator too), in the caller's transaction; sent by the receipt job (src/messaging/receipts.ts), so a provider
 * that fails never fails the call that queued it.
 */
export async function queueReceipt(tx: Tx, now: Date, tenantId: string, conversationId: string, typing: boolean): Promise<void> {
  await enqueue(tx, now, { task: RECEIPT_TASK, tenantId, payload: { conversationId, typing }, maxAttempts: 3 });
}
