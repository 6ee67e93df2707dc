/** Values the conversation schema, repository and service share. */
export const REVIEW_REASONS = ['ai_response_issue', 'knowledge_gap', 'policy_compliance', 'guest_experience', 'booking_payment', 'other'] as const;
export const CHANNEL_FILTERS = ['all', 'whatsapp', 'instagram', 'messenger', 'webchat'] as const;
/**
 * A contact search counts at most this many matches (the most recently active); past it the response says
 * `inboxCountsCapped: true`. Counting every match of a short fragment costs time in proportion to the tenant's
 * inbox; this keeps a search's cost bounded whatever the inbox size (docs/decisions.md). At least the largest
 * page (100): a search's first page is cut from the counted matches.
 */
export const SEARCH_COUNT_CAP = 100;
