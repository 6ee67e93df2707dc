import type { Queryable } from '../db/driver.js';
import type { ChannelRow } from '../channels/repo.js';

export type RequestStatus = 'queued' | 'sent' | 'delivered' | 'read' | 'failed';

export interface MessageRequestRow {
  id: string;
  tenant_id: string;
  conversation_id: string;
  reply_id: string;
  channel_id: string;
  channel_kind: string;
  recipient_phone: string | null;
  template_name: string | null;
  locale: string | null;
  text: string;
  status: RequestStatus;
  provider: string;
  provider_message_id: string | null;
  dispatching_at: Date | null;
  dispatch_attempts: number;
  unknown_outcomes: number;
  error_code: string | null;
  error_message: string | null;
  reconciled_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

/** A status move as message_status_apply takes it (src/messaging/sql/message_status_apply.sql). */
export interface PreparedStatusMove {
  tenantId: string;
  requestId: string;
  status: RequestStatus;
  errorCode: string | null;
  errorMessage: string | null;
  /** ISO time it happened (a read's readAt). */
  at: string;
  eventId: string;
  eventBody: string;
  eventReadScope: string;
  eventWriteScope: string;
}

export interface StatusMoveOutcome {
  moved: boolean;
  /** The request's error after the move (null when it did not move). */
  errorCode: string | null;
  errorMessage: string | null;
  deliveries: number;
}

/** A message request whose send job is about to call the provider. */
export interface DispatchStart {
  tenantId: string;
  id: string;
  at: Date;
}

/**
 * What the send job sends besides the text (decisions 7.2), read from the outbound message: its type, its media
 * (bytes under mediaBlobKey), and the provider's ids of the message it answers or reacts to (null when that
 * message has none: a simulated one, or a send not accepted yet).
 */
export interface DispatchContent {
  type: string;
  media: { contentType: string; sizeBytes?: number; filename?: string; providerMediaId?: string } | null;
  reaction: { emoji: string; targetMessageId: string } | null;
  replyToProviderMessageId: string | null;
  targetProviderMessageId: string | null;
}

/**
 * A request about to be sent, with its channel's provider and connection (tokens still sealed), the recipient's
 * handle (Messenger/Instagram address guests by their page-scoped id, webchat by the visitor id; not by phone) and its
 * content.
 */
export type DispatchRow = MessageRequestRow & { channel_provider: ChannelRow['provider']; recipient_handle: string | null } & Pick<ChannelRow, 'connection' | 'connection_secret'> & {
  content: DispatchContent | null;
};

/** A send the provider accepted, as message_sends_accepted (src/messaging/sql/message_sends_accepted.sql) records it. */
export interface AcceptedSend {
  tenantId: string;
  requestId: string;
  /** Null when the provider creates no message for the request (a Messenger reaction). */
  providerMessageId: string | null;
  at: Date;
  /** The send job's lease: the job succeeds only while this worker holds it. */
  jobId: number;
  workerId: string;
  /** message.delivery.updated (status sent), emitted when the request moves from queued. */
  eventId: string;
  eventBody: string;
  eventReadScope: string;
  eventWriteScope: string;
}

export interface AcceptedOutcome {
  outcome: 'sent' | 'unchanged' | 'missing' | 'lease_lost';
  deliveries: number;
}

/** The provider's id of message $ID of the same tenant: an inbound message's own, an outbound one's send's. */
const PROVIDER_ID_OF = `SELECT COALESCE(t.provider_message_id, tr.provider_message_id) FROM messages t
  LEFT JOIN message_requests tr ON tr.id = t.request_event_id AND tr.tenant_id = t.tenant_id
  WHERE t.id = $ID AND t.tenant_id = m.tenant_id`;

export const messageRequestRepo = {
  async get(db: Queryable, tenantId: string, id: string, lock = false): Promise<MessageRequestRow | undefined> {
    return (await db.query<MessageRequestRow>(`SELECT * FROM message_requests WHERE tenant_id = $1 AND id = $2${lock ? ' FOR NO KEY UPDATE' : ''}`, [tenantId, id]))[0];
  },

  /** Across tenants by design: a provider's status callback names only its own message id. */
  async getByProviderId(db: Queryable, provider: string, providerMessageId: string): Promise<MessageRequestRow | undefined> {
    return (await db.query<MessageRequestRow>('SELECT * FROM message_requests WHERE provider = $1 AND provider_message_id = $2', [provider, providerMessageId]))[0];
  },

  /** The requests of these provider message ids (each with its provider), in one statement; absent ones are left out. */
  async getManyByProviderIds(db: Queryable, refs: ReadonlyArray<{ provider: string; providerMessageId: string }>): Promise<MessageRequestRow[]> {
    if (refs.length === 0) return [];
    return db.query<MessageRequestRow>(
      `SELECT r.* FROM unnest($1::text[], $2::text[]) AS k(provider, provider_message_id)
       JOIN message_requests r ON r.provider = k.provider AND r.provider_message_id = k.provider_message_id`,
      [refs.map((ref) => ref.provider), refs.map((ref) => ref.providerMessageId)],
    );
  },

  /**
   * A send of the conversation whose provider call is under way (started within `sinceMs`, no provider id yet): a
   * Messenger/Instagram echo of it may arrive before its id is recorded. Through the conversation's messages
   * (indexed by conversation), then each request by its key.
   */
  async dispatchInFlight(db: Queryable, tenantId: string, conversationId: string, now: Date, sinceMs: number): Promise<boolean> {
    const rows = await db.query<{ id: string }>(
      `SELECT r.id FROM messages m JOIN message_requests r ON r.id = m.request_event_id AND r.tenant_id = m.tenant_id
       WHERE m.tenant_id = $1 AND m.conversation_id = $2 AND m.direction = 'outbound' AND m.created_at >= $3::timestamptz - interval '1 day'
         AND r.status = 'queued' AND r.provider_message_id IS NULL AND r.dispatching_at >= $3::timestamptz - make_interval(secs => $4::double precision / 1000)
       LIMIT 1`,
      [tenantId, conversationId, now, sinceMs],
    );
    return rows.length > 0;
  },

  /**
   * The conversation's sends a Messenger/Instagram receipt reaches, locked: those still before `status` (sent, or
   * sent and delivered for a read) created at or before the watermark, or named by provider id. The newest 200 at
   * most: older ones were reached by earlier receipts.
   */
  async reachedByWatermark(
    db: Queryable,
    tenantId: string,
    conversationId: string,
    status: 'delivered' | 'read',
    watermark: Date | null,
    providerMessageIds: readonly string[],
  ): Promise<MessageRequestRow[]> {
    return db.query<MessageRequestRow>(
      `SELECT r.* FROM messages m JOIN message_requests r ON r.id = m.request_event_id AND r.tenant_id = m.tenant_id
       WHERE m.tenant_id = $1 AND m.conversation_id = $2 AND m.direction = 'outbound'
         AND r.status = ANY($3::text[]) AND r.provider_message_id IS NOT NULL
         AND (m.created_at <= $4::timestamptz OR r.provider_message_id = ANY($5::text[]))
       ORDER BY m.created_at DESC, m.id DESC LIMIT 200
       FOR NO KEY UPDATE OF r`,
      [tenantId, conversationId, status === 'read' ? ['sent', 'delivered'] : ['sent'], watermark, providerMessageIds],
    );
  },

  async hasUnreconciledFailure(db: Queryable, tenantId: string, recipientPhone: string): Promise<string | undefined> {
    const rows = await db.query<{ id: string }>(
      `SELECT id FROM message_requests WHERE tenant_id = $1 AND recipient_phone = $2 AND status = 'failed' AND reconciled_at IS NULL ORDER BY created_at DESC LIMIT 1`,
      [tenantId, recipientPhone],
    );
    return rows[0]?.id;
  },

  /**
   * Marks the provider call of requests that are still to be sent (queued, no provider id, no call under way) as
   * started, in one statement committed before the calls (so that a crash leaves evidence), and returns them with
   * their channel's sender id: one row per request, in their order, undefined for one not in that state (or named
   * twice: its second time). Arrays, not a JSON document: the planner sizes unnest() by its arrays and so looks
   * each request up by its key (a JSON document is planned as a guessed number of rows, and may be hash-joined
   * with the whole table).
   */
  async startDispatches(db: Queryable, requests: readonly DispatchStart[]): Promise<Array<DispatchRow | undefined>> {
    const rows = await db.query<DispatchRow>(
      `UPDATE message_requests r SET dispatching_at = d.at, dispatch_attempts = r.dispatch_attempts + 1, updated_at = d.at
       FROM unnest($1::text[], $2::text[], $3::timestamptz[]) AS d(tenant_id, id, at), channels c
       WHERE r.tenant_id = d.tenant_id AND r.id = d.id AND r.status = 'queued' AND r.provider_message_id IS NULL AND r.dispatching_at IS NULL
         AND c.id = r.channel_id AND c.tenant_id = r.tenant_id
       RETURNING r.*, c.provider AS channel_provider, c.connection, c.connection_secret,
         CASE WHEN c.provider IN ('messenger', 'instagram', 'webchat') THEN
           (SELECT ct.handle FROM conversations cv JOIN contacts ct ON ct.id = cv.contact_id AND ct.tenant_id = cv.tenant_id
            WHERE cv.id = r.conversation_id AND cv.tenant_id = r.tenant_id) END AS recipient_handle,
         (SELECT jsonb_build_object('type', m.type, 'media', m.media, 'reaction', m.reaction,
                   'replyToProviderMessageId', (${PROVIDER_ID_OF.replace('$ID', 'm.reply_to_message_id')}),
                   'targetProviderMessageId', (${PROVIDER_ID_OF.replace('$ID', "m.reaction ->> 'targetMessageId'")}))
          FROM messages m WHERE m.id = r.reply_id AND m.tenant_id = r.tenant_id) AS content`,
      [requests.map((r) => r.tenantId), requests.map((r) => r.id), requests.map((r) => r.at)],
    );
    const byId = new Map(rows.map((row) => [`${row.tenant_id}/${row.id}`, row]));
    return requests.map(({ tenantId, id }) => {
      const key = `${tenantId}/${id}`;
      const row = byId.get(key);
      byId.delete(key);
      return row;
    });
  },

  /** The provider's id of an outbound message's uploaded media, so that a retried send does not upload it again. */
  async noteUploaded(db: Queryable, tenantId: string, messageId: string, providerMediaId: string): Promise<void> {
    await db.query(`UPDATE messages SET media = media || jsonb_build_object('providerMediaId', $3::text) WHERE tenant_id = $1 AND id = $2`, [tenantId, messageId, providerMediaId]);
  },

  async noteUnknownOutcome(db: Queryable, tenantId: string, id: string, now: Date): Promise<void> {
    await db.query('UPDATE message_requests SET dispatching_at = NULL, unknown_outcomes = unknown_outcomes + 1, updated_at = $2 WHERE id = $1 AND tenant_id = $3', [
      id,
      now,
      tenantId,
    ]);
  },

  /** Sends the provider accepted, in one statement (message_sends_accepted): one outcome per send, in their order. */
  async recordSendsAccepted(db: Queryable, sends: readonly AcceptedSend[], webhooksChannel: string): Promise<AcceptedOutcome[]> {
    const rows = await db.query<{ ordinal: number; outcome: AcceptedOutcome['outcome']; deliveries: number }>(
      'SELECT * FROM message_sends_accepted($1::jsonb, $2)',
      [JSON.stringify(sends), webhooksChannel],
    );
    return rows.sort((a, b) => a.ordinal - b.ordinal).map(({ outcome, deliveries }) => ({ outcome, deliveries }));
  },

  async recordDispatchError(db: Queryable, tenantId: string, id: string, error: { code: string; message: string }, now: Date): Promise<void> {
    await db.query(`UPDATE message_requests SET dispatching_at = NULL, error_code = $2, error_message = $3, updated_at = $4 WHERE id = $1 AND tenant_id = $5`, [
      id,
      error.code,
      error.message,
      now,
      tenantId,
    ]);
  },

  /** Status moves, prepared by moveStatuses (src/messaging/status.ts), in one statement: per move, in order, its outcome. */
  async applyStatusMoves(db: Queryable, moves: readonly PreparedStatusMove[], now: Date): Promise<StatusMoveOutcome[]> {
    const rows = await db.query<{ ordinal: number; moved: boolean; new_error_code: string | null; new_error_message: string | null; deliveries: number }>(
      'SELECT * FROM message_status_apply($1::jsonb, $2)',
      [JSON.stringify(moves), now],
    );
    return rows
      .sort((x, y) => x.ordinal - y.ordinal)
      .map((row) => ({ moved: row.moved, errorCode: row.new_error_code, errorMessage: row.new_error_message, deliveries: row.deliveries }));
  },

  async reconcile(db: Queryable, tenantId: string, id: string, now: Date): Promise<MessageRequestRow | undefined> {
    const rows = await db.query<MessageRequestRow>(
      `UPDATE message_requests SET reconciled_at = COALESCE(reconciled_at, $3), updated_at = $3 WHERE tenant_id = $1 AND id = $2 AND status = 'failed' RETURNING *`,
      [tenantId, id, now],
    );
    return rows[0];
  },
};
