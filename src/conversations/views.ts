import { iso } from '../util/time.js';
import type { HandoffRow, ReviewRow } from './case-repo.js';
import type { ContactRow } from './repo.js';
import type { InboxRow } from './search-sql.js';

export function contactView(row: ContactRow) {
  return {
    contactId: row.id,
    name: row.name ?? undefined,
    phone: row.phone_e164 ?? undefined,
    handle: row.handle ?? undefined,
    consent: row.consent,
    optedOut: row.opted_out,
  };
}

export function conversationView(row: InboxRow) {
  return {
    conversationId: row.id,
    channel: row.channel_kind,
    channelId: row.channel_id,
    contact: { contactId: row.contact_id, name: row.contact_name ?? undefined, phone: row.contact_phone ?? undefined },
    ownerOperatorId: row.owner_operator_id,
    unreadCount: row.unread_count,
    needsReply: row.needs_reply,
    lastMessageAt: iso(row.last_message_at)!,
    lastMessagePreview: row.last_message_preview ?? undefined,
    openReview: row.open_review_id !== null,
    openHandoff: row.open_handoff_id !== null,
    createdAt: iso(row.created_at)!,
  };
}

export function reviewView(row: ReviewRow) {
  return {
    ok: true as const,
    conversationId: row.conversation_id,
    reviewCaseId: row.id,
    status: row.status,
    reasonCode: row.reason_code,
    requestedByOperatorId: row.requested_by_id,
    requestedByOperatorName: row.requested_by_name,
    requestedAt: iso(row.requested_at)!,
    note: row.note ?? undefined,
    assignedOperatorId: row.assigned_operator_id ?? undefined,
    assignedOperatorName: row.assigned_operator_name ?? undefined,
    resolvedAt: iso(row.resolved_at),
    resolutionNote: row.resolution_note ?? undefined,
  };
}

export function handoffView(row: HandoffRow) {
  return {
    handoffId: row.id,
    conversationId: row.conversation_id,
    status: row.status,
    assignedOperatorId: row.assigned_operator_id,
    openedAt: iso(row.opened_at)!,
    resolvedAt: iso(row.resolved_at),
    updatedAt: iso(row.updated_at)!,
  };
}
