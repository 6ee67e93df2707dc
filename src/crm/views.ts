import { iso } from '../util/time.js';
import type { FollowUpRow, SettingsRow } from './repo.js';

export const REASON_CODES = ['no_reply', 'quote_sent', 'booking_abandoned', 'post_stay', 'other'] as const;

const reasonLabels: Record<string, string> = {
  no_reply: 'The guest has not replied',
  quote_sent: 'A quote was sent and not answered',
  booking_abandoned: 'The guest started a booking and did not finish it',
  post_stay: 'Follow up after the stay',
  other: 'Follow up',
};

export function followUpView(row: FollowUpRow) {
  return {
    followUpId: row.id,
    leadId: row.lead_id,
    status: row.status,
    mode: row.mode,
    opportunityId: row.opportunity_id ?? undefined,
    conversationId: row.conversation_id,
    channel: row.channel_kind,
    reasonCode: row.reason_code,
    reasonText: row.reason_text ?? undefined,
    reason: row.reason_text ?? reasonLabels[row.reason_code] ?? row.reason_code,
    messageDraft: row.message_draft ?? undefined,
    draftStatus: row.draft_status,
    dueAt: iso(row.due_at),
    expiresAt: iso(row.expires_at)!,
    sentAt: iso(row.sent_at),
    replyId: row.reply_id ?? undefined,
    createdAt: iso(row.created_at)!,
    updatedAt: iso(row.updated_at)!,
  };
}

export function settingsView(row: SettingsRow, tenant: { timezone: string; sales_available: boolean; sales_published: boolean }) {
  return {
    followUpMode: row.follow_up_mode,
    followUpLevel: row.follow_up_level,
    ...(row.follow_up_instructions !== null ? { followUpInstructions: row.follow_up_instructions } : {}),
    ...(row.quiet_start && row.quiet_end ? { quietHours: { start: row.quiet_start, end: row.quiet_end } } : {}),
    timezone: tenant.timezone,
    salesAvailable: tenant.sales_available,
    salesPublished: tenant.sales_published,
  };
}

/**
 * The draft automation prepares when no one wrote one: a short template per reason. (There is no
 * language model here; followUpInstructions are stored for the one that writes drafts in production.)
 */
export function generatedDraft(row: FollowUpRow, contactName: string | null): string {
  const greeting = contactName ? `Hi ${contactName.split(' ')[0]},` : 'Hi,';
  const body: Record<string, string> = {
    no_reply: 'just checking in on your last message. Is there anything else we can help you with?',
    quote_sent: 'did you have a chance to look at the quote we sent? We are happy to answer any question.',
    booking_abandoned: 'we noticed your booking was not completed. Would you like us to help you finish it?',
    post_stay: 'thank you for staying with us. We would love to hear how everything went.',
    other: 'we wanted to follow up with you. Let us know if we can help.',
  };
  return `${greeting} ${body[row.reason_code] ?? body.other}`;
}
