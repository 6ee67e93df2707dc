import type { ChannelKind } from '../channels/repo.js';
import type { Db } from '../db/driver.js';
import { requireConversation } from '../conversations/service.js';

export interface ConversationChannel {
  channelId: string;
  kind: ChannelKind;
}

/**
 * The channel of each conversation replied to lately, so that a reply needs no read before its one statement.
 * Facts that never change (a conversation keeps its channel, a channel its kind); what can change (the channel's
 * availability, the contact's opt-out, the window) is checked by that statement. Bounded: the least recently
 * used entry goes first.
 */
export class ConversationChannels {
  private readonly entries = new Map<string, ConversationChannel>();
  constructor(
    private readonly db: Db,
    private readonly capacity: number,
  ) {}

  /** The conversation's channel; 404 when the tenant has no such conversation. */
  async of(tenantId: string, conversationId: string): Promise<ConversationChannel> {
    const key = `${tenantId}/${conversationId}`;
    const known = this.entries.get(key);
    if (known) {
      this.entries.delete(key);
      this.entries.set(key, known);
      return known;
    }
    const conversation = await requireConversation(this.db, tenantId, conversationId);
    const channel = { channelId: conversation.channel_id, kind: conversation.channel_kind };
    this.entries.set(key, channel);
    const oldest = this.entries.keys().next();
    if (this.entries.size > this.capacity && !oldest.done) this.entries.delete(oldest.value);
    return channel;
  }

  forget(tenantId: string, conversationId: string): void {
    this.entries.delete(`${tenantId}/${conversationId}`);
  }
}
