/* global process, console */
/**
 * The SDK tour in plain JavaScript: run with `node`, no TypeScript loader, against the built package.
 *
 *   M2M_API_KEY=m2m_live_… node packages/client/examples/tour.mjs
 *
 * M2M_BASE_URL defaults to http://127.0.0.1:8080/m2m/v1 (`npx m2m dev`'s server). The key needs
 * conversations:read, webhooks:read, webhooks:write and the read scope of the subscribed events (`m2m dev`'s key
 * has every scope). It lists conversations, subscribes a URL to `message.created` (WEBHOOK_URL, default
 * https://hooks.example.com/m2m), shows the subscription's health, reads the event feed, and deletes the
 * subscription again so that running it twice leaves nothing behind.
 */
import { ApiError, M2MClient } from '@m2m/client';

const apiKey = process.env.M2M_API_KEY;
if (!apiKey) {
  console.error('M2M_API_KEY is required (npx m2m dev prints one)');
  process.exit(1);
}
const m2m = new M2MClient({ apiKey, baseUrl: process.env.M2M_BASE_URL || 'http://127.0.0.1:8080/m2m/v1' });

try {
  // 1. Conversations, most recent first; `iterate` walks every page, `list` returns one.
  const { conversations } = await m2m.conversations.list({ limit: 5 });
  console.log(`${conversations.length} conversations`);
  for (const conversation of conversations) {
    console.log(`  ${conversation.conversationId}  ${conversation.contact.name ?? conversation.contact.phone ?? '?'}: ${conversation.lastMessagePreview ?? ''}`);
  }

  // 2. A webhook subscription. Its signing secret is shown only here (and on rotation): store it.
  const subscription = await m2m.webhooks.create({
    url: process.env.WEBHOOK_URL || 'https://hooks.example.com/m2m',
    events: ['message.created'],
    description: 'SDK tour',
  });
  console.log(`subscription ${subscription.subscriptionId} → ${subscription.url}, secret ${subscription.secret}`);
  const { subscriptions } = await m2m.webhooks.list();
  for (const { subscriptionId, active, health } of subscriptions) {
    console.log(`  ${subscriptionId}  ${active ? 'active' : 'inactive'}, ${health.consecutiveFailures} failures in a row`);
  }

  // 3. The event feed, oldest first: what the subscription is sent, readable without one.
  const feed = await m2m.events.list({ types: 'message.created', limit: 5 });
  console.log(`${feed.events.length} message.created events (more: ${feed.hasMore})`);
  for (const event of feed.events) console.log(`  ${event.occurredAt}  ${event.type}  ${event.eventId}`);

  await m2m.webhooks.delete({ subscriptionId: subscription.subscriptionId });
  console.log(`subscription ${subscription.subscriptionId} deleted`);
} catch (error) {
  // Every API error is one envelope, {error: {code, message, details}}, plus the X-Request-Id header.
  if (error instanceof ApiError) console.error(`${error.status} ${error.code}: ${error.message} (request id ${error.requestId})`);
  else console.error(error);
  process.exitCode = 1;
}
