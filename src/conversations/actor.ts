/** LISTEN/NOTIFY channel that wakes the admin conversation-activity stream. */
export const ACTIVITY_CHANNEL = 'conversation-activity';
