import type { Static } from 'typebox';
import type { Ctx } from '../context.js';
import type { Db } from '../db/driver.js';
import { notFound } from '../errors.js';
import type { Cursors } from '../platform/cursor.js';
import { iso } from '../util/time.js';
import { historyRepo } from './history-repo.js';
import { integrationRepo } from './repo.js';
import type { AttemptsParams, AttemptsQuery, ReceiptsQuery } from './schema.js';
import { attemptView } from './views.js';

/** The seed's fixed page of attempt and receipt lists, like the reservation list. */
const PAGE_SIZE = 20 as const;

/** A reservation's lifecycle attempts and the tenant's lifecycle receipts, 20 a page, newest first. */
export class ReservationHistoryService {
  constructor(
    private readonly db: Db,
    private readonly cursors: Cursors,
  ) {}

  async attempts({ tenantId }: Ctx, input: Static<typeof AttemptsParams> & Static<typeof AttemptsQuery>) {
    const binding = { tenantId, integrationId: input.integrationId, providerReservationId: input.providerReservationId };
    const reservationId = await historyRepo.reservationId(this.db, tenantId, input.integrationId, input.providerReservationId);
    if (!reservationId) {
      if (!(await integrationRepo.get(this.db, tenantId, input.integrationId))) throw notFound('integration');
      throw notFound('provider reservation');
    }
    const beforeId = input.cursor ? this.cursors.decode<number>('reservation-attempts', binding, input.cursor) : undefined;
    const rows = await historyRepo.attempts(this.db, tenantId, reservationId, { limit: PAGE_SIZE + 1, beforeId });
    const { page, hasMore, next } = this.cursors.page('reservation-attempts', binding, rows, PAGE_SIZE, (last) => last.id);
    return { attempts: page.map(attemptView), pageSize: PAGE_SIZE, hasNext: hasMore, ...next };
  }

  async receipts({ tenantId }: Ctx, query: Static<typeof ReceiptsQuery>) {
    const filter = { integrationId: query.integrationId, eventType: query.eventType };
    const binding = { tenantId, ...filter };
    if (query.integrationId && !(await integrationRepo.get(this.db, tenantId, query.integrationId))) throw notFound('integration');
    const beforeId = query.cursor ? this.cursors.decode<number>('lifecycle-receipts', binding, query.cursor) : undefined;
    const rows = await historyRepo.receipts(this.db, tenantId, filter, { limit: PAGE_SIZE + 1, beforeId });
    const { page, hasMore, next } = this.cursors.page('lifecycle-receipts', binding, rows, PAGE_SIZE, (last) => last.id);
    const receipts = page.map((row) => ({
      integrationId: row.integration_id,
      providerReservationId: row.provider_reservation_id,
      lifecycleEventType: row.event_type,
      conversationId: row.conversation_id,
      requestEventId: row.request_event_id,
      status: row.status,
      createdAt: iso(row.created_at)!,
    }));
    return { receipts, pageSize: PAGE_SIZE, hasNext: hasMore, ...next };
  }
}
