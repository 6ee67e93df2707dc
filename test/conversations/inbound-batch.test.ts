import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { writeInbound, type InboundInput } from '../../src/conversations/inbox.js';
import { writeInboundBatch, type InboundBatchItem } from '../../src/conversations/inbound-batch.js';
import { conversationRepo } from '../../src/conversations/repo.js';
import { channelRepo, type ChannelRow } from '../../src/channels/repo.js';

// writeInboundBatch writes a group of inbound messages with a few statements; its outcome must be the one writing the
// same messages one by one with writeInbound gives. The same messages go to two tenants, one each way, and
// everything the inbox shows is compared: contacts, conversations (unread, needs-reply, preview, times, copies),
// messages (replies and reactions resolved), activity, events and the inbox counters.

const T0 = Date.parse('2026-05-01T10:00:00.000Z');
const at = (seconds: number) => new Date(T0 + seconds * 1000);
const NOW = at(60);

interface Item {
  phone?: string;
  handle?: string;
  name?: string;
  text: string;
  seconds: number;
  id: string;
  replyTo?: string;
  reactTo?: string;
}

/** Known contacts, renamed, new ones, older messages, redeliveries (also within the group), replies and a reaction to earlier items. */
const ITEMS: Item[] = [
  { phone: '+34612345601', name: 'Ana', text: 'first', seconds: 10, id: 'wamid.1' },
  { phone: '+34612345602', text: 'new guest', seconds: 5, id: 'wamid.2' },
  { phone: '+34612345601', text: 'older than the last activity', seconds: 3, id: 'wamid.3' },
  { phone: '+34612345601', name: 'Ana Belén', text: 'renamed', seconds: 20, id: 'wamid.4' },
  { phone: '+34612345602', name: 'Bo', text: 'before the conversation began', seconds: 1, id: 'wamid.5' },
  { phone: '+34612345601', text: 'redelivered', seconds: 30, id: 'wamid.1' },
  { phone: '+34612345603', text: 'answers the new guest', seconds: 6, id: 'wamid.6', replyTo: 'wamid.2' },
  { phone: '+34612345601', text: '', seconds: 25, id: 'wamid.7', reactTo: 'wamid.4' },
  { phone: '+34612345601', text: 'stored before', seconds: 40, id: 'wamid.0' },
  { handle: 'page-scoped-9', name: 'Handle Only', text: 'by handle', seconds: 12, id: 'wamid.8', replyTo: 'wamid.0' },
  { phone: '+34612345604', text: 'twice in the group, first', seconds: 15, id: 'wamid.9' },
  { phone: '+34612345604', text: 'twice in the group, second', seconds: 16, id: 'wamid.9' },
];

function input(item: Item): InboundInput {
  return {
    contact: { ...(item.phone ? { phone: item.phone, phoneFromProvider: true } : {}), ...(item.handle ? { handle: item.handle } : {}), ...(item.name ? { name: item.name } : {}) },
    text: item.text,
    at: at(item.seconds),
    type: item.reactTo ? 'reaction' : 'text',
    source: 'channel',
    providerMessageId: item.id,
    ...(item.reactTo ? { reaction: { emoji: '👍', targetProviderMessageId: item.reactTo } } : {}),
  };
}

async function world(app: TestApp): Promise<{ tenantId: string; channel: ChannelRow }> {
  const { tenantId } = await app.tenantWithKey(['conversations:read']);
  const { channelId } = await app.admin<{ channelId: string }>('POST', `/tenants/${tenantId}/channels`, { kind: 'whatsapp', name: 'WhatsApp' });
  const { db } = app.runtime.services;
  const channel = (await channelRepo.get(db, tenantId, channelId))!;
  // Before the group: a known guest with a name and an earlier message (wamid.0, redelivered in the group).
  await db.transaction((tx) => writeInbound(tx, channel, input({ phone: '+34612345601', name: 'Old name', text: 'earlier', seconds: 2, id: 'wamid.0' }), at(2)));
  return { tenantId, channel };
}

async function snapshot(app: TestApp, tenantId: string) {
  const { db } = app.runtime.services;
  const q = <T>(sql: string) => db.query<T>(sql, [tenantId]);
  const pid = new Map((await q<{ id: string; provider_message_id: string }>('SELECT id, provider_message_id FROM messages WHERE tenant_id = $1')).map((m) => [m.id, m.provider_message_id]));
  const contactKey = new Map((await q<{ id: string; phone_e164: string | null; handle: string | null }>('SELECT id, phone_e164, handle FROM contacts WHERE tenant_id = $1')).map((c) => [c.id, c.phone_e164 ?? c.handle]));
  return {
    contacts: await q(`SELECT name, phone_e164, handle, search_text, created_at, updated_at FROM contacts WHERE tenant_id = $1 ORDER BY phone_e164 NULLS LAST, handle`),
    conversations: (
      await q<Record<string, unknown> & { contact_id: string; needs_reply_event_id: string | null }>(
        `SELECT contact_id, unread_count, needs_reply, needs_reply_reason, needs_reply_detail, needs_reply_event_id, last_message_at, last_message_preview,
                last_inbound_at, contact_name, contact_phone, created_at, updated_at
         FROM conversations WHERE tenant_id = $1`,
      )
    )
      .map(({ contact_id, needs_reply_event_id, ...rest }) => ({ ...rest, contact: contactKey.get(contact_id), needsReplyFor: needs_reply_event_id ? pid.get(needs_reply_event_id) : null }))
      .sort((a, b) => String(a.contact).localeCompare(String(b.contact))),
    messages: (
      await q<Record<string, unknown> & { id: string; conversation_id: string; provider_message_id: string; reply_to_message_id: string | null; reaction: { targetMessageId?: string } | null }>(
        `SELECT id, conversation_id, provider_message_id, text, created_at, type, source, direction, reply_to_message_id, reaction FROM messages WHERE tenant_id = $1`,
      )
    )
      .map(({ id: _id, conversation_id: _c, reply_to_message_id, reaction, ...rest }) => ({
        ...rest,
        replyTo: reply_to_message_id ? pid.get(reply_to_message_id) : null,
        reactionTarget: reaction?.targetMessageId ? pid.get(reaction.targetMessageId) : null,
      }))
      .sort((a, b) => String(a.provider_message_id).localeCompare(String(b.provider_message_id))),
    activity: await q(`SELECT kind, actor_type, count(*)::int AS n FROM conversation_activity WHERE tenant_id = $1 GROUP BY 1, 2 ORDER BY 1, 2`),
    events: await q(`SELECT type, count(*)::int AS n FROM webhook_events WHERE tenant_id = $1 GROUP BY 1 ORDER BY 1`),
    counters: await q(`SELECT channel_kind, owner_key, total, unread, needs_reply FROM inbox_counters WHERE tenant_id = $1 ORDER BY 1, 2`),
  };
}

test('a group written by writeInboundBatch ends as writing its messages one by one with writeInbound', async () => {
  const app = await startTestApp();
  try {
    const { db } = app.runtime.services;
    const one = await world(app);
    const batch = await world(app);

    const oneByOne = await db.transaction(async (tx) => {
      const outcomes: boolean[] = [];
      for (const item of ITEMS) {
        const ours = (providerId: string | undefined) => (providerId ? conversationRepo.messageIdByProviderId(tx, one.tenantId, one.channel.id, providerId) : Promise.resolve(undefined));
        const base = input(item);
        const replyToMessageId = await ours(item.replyTo);
        const targetMessageId = await ours(item.reactTo);
        const full: InboundInput = {
          ...base,
          ...(base.reaction && targetMessageId ? { reaction: { ...base.reaction, targetMessageId } } : {}),
          ...(replyToMessageId ? { replyToMessageId } : {}),
        };
        outcomes.push((await writeInbound(tx, one.channel, full, NOW)) !== undefined);
      }
      return outcomes;
    });
    const grouped = await db.transaction(async (tx) => {
      const items: InboundBatchItem[] = ITEMS.map((item) => ({ channel: batch.channel, input: input(item), ...(item.replyTo ? { replyToProviderMessageId: item.replyTo } : {}) }));
      return (await writeInboundBatch(tx, items, NOW)).map((written) => written !== undefined);
    });

    assert.deepEqual(grouped, oneByOne, 'the same items written, the same ones found to be redeliveries');
    assert.deepEqual(oneByOne, [true, true, true, true, true, false, true, true, false, true, true, false]);
    const expected = await snapshot(app, one.tenantId);
    const actual = await snapshot(app, batch.tenantId);
    assert.deepEqual(actual, expected);
    // The group really exercised what it meant to: a rename, an uncounted older message, a resolved reply and reaction.
    assert.ok(expected.contacts.some((c) => (c as { name: string }).name === 'Ana Belén'));
    assert.ok(expected.messages.some((m) => m.replyTo === 'wamid.2') && expected.messages.some((m) => m.reactionTarget === 'wamid.4'));

    // Written again, the whole group is a redelivery: nothing more.
    const again = await db.transaction(async (tx) => writeInboundBatch(tx, ITEMS.map((item) => ({ channel: batch.channel, input: input(item) })), NOW));
    assert.ok(again.every((written) => written === undefined));
    assert.deepEqual((await snapshot(app, batch.tenantId)).messages, actual.messages);
  } finally {
    await app.close();
  }
});
