import { randomInt } from 'node:crypto';
import { adminClient, type AdminClient } from './admin.js';
import { publicClient } from './client.js';
import type { Command } from './command.js';
import type { CliConfig } from './config.js';
import { GUESTS } from './demo.js';
import { inboundText, postCallback } from './dev-graph.js';
import { UsageError } from './errors.js';
import { emit } from './output.js';

interface Target {
  admin: AdminClient;
  config: CliConfig;
  tenant: string;
  channelId?: string;
}

type Result = Record<string, string | number | boolean>;


/**
 * A guest writes in on WhatsApp: the way most events begin. On the `m2m dev` channel the message comes as Meta
 * would post it (a signed callback to the server's Meta route, processed by its workers); elsewhere through the
 * admin API's inbound route.
 */
async function inboundMessage(target: Target): Promise<{ conversationId: string; messageId: string; contactId: string }> {
  const dev = target.config.dev;
  if (dev?.whatsapp && target.channelId === dev.channelId && target.tenant === encodeURIComponent(dev.tenantId)) return inboundThroughMeta(target, dev.whatsapp, dev.apiKey);
  const channelId = target.channelId ?? (await target.admin.call<{ channelId: string }>('POST', `/tenants/${target.tenant}/channels`, { kind: 'whatsapp', name: 'WhatsApp (m2m trigger)' })).channelId;
  target.channelId = channelId;
  const guest = GUESTS[randomInt(GUESTS.length)];
  const phone = `+3460${String(randomInt(10_000_000)).padStart(7, '0')}`;
  return target.admin.call('POST', `/tenants/${target.tenant}/inbound-messages`, { channelId, contact: { name: guest.name, phone }, text: guest.text });
}

async function inboundThroughMeta(target: Target, whatsapp: NonNullable<CliConfig['dev']>['whatsapp'] & object, apiKey: string) {
  const guest = GUESTS[randomInt(GUESTS.length)];
  const phone = `+3460${String(randomInt(10_000_000)).padStart(7, '0')}`;
  await postCallback(whatsapp.callbackUrl, whatsapp.appSecret, inboundText(whatsapp, { name: guest.name, phone }, guest.text));
  // Meta's 200 only says the callback was stored: the conversation appears once a worker has processed it.
  const client = publicClient({ ...target.config, apiKey });
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    const [conversation] = (await client.conversations.list({ contactQuery: phone.slice(1), limit: 1 })).conversations;
    if (conversation) {
      const [message] = (await client.conversations.messages.list({ conversationId: conversation.conversationId, limit: 1 })).messages;
      return { conversationId: conversation.conversationId, messageId: message.messageId, contactId: conversation.contact.contactId, via: 'a signed WhatsApp Cloud API callback' };
    }
    await new Promise((resolveWait) => setTimeout(resolveWait, 100));
  }
  throw new Error(`the server stored the callback but no conversation with ${phone} appeared within 30 s: are its workers running?`);
}

async function opportunity(target: Target): Promise<{ leadId: string; opportunityId: string }> {
  const lead = await target.admin.call<{ leadId: string }>('POST', `/tenants/${target.tenant}/leads`, { name: 'Marta Ruiz', phone: '+34611222333' });
  const created = await target.admin.call<{ opportunityId: string }>('POST', `/tenants/${target.tenant}/opportunities`, { leadId: lead.leadId, stage: 'inquiry', status: 'open' });
  return { leadId: lead.leadId, opportunityId: created.opportunityId };
}

/** Types the admin API cannot cause for real here (a crawl needs a website; auto-disable takes days): a synthetic event through the real outbox. */
async function synthetic(target: Target, type: string, data: Record<string, unknown>): Promise<Result> {
  const emitted = await target.admin.call<{ eventId: string }>('POST', `/tenants/${target.tenant}/webhook-events`, { type, data });
  return { eventId: emitted.eventId, synthetic: true };
}

const ids = (prefix: string) => `${prefix}_trigger${randomInt(1_000_000)}`;

/** How each event type is produced: through the same admin routes a channel, a PMS or a dashboard would use. */
const SIMULATIONS: Record<string, { how: string; run(target: Target): Promise<Result> }> = {
  'message.created': { how: 'an inbound WhatsApp message from a guest', run: (target) => inboundMessage(target) },
  'message.delivery.updated': {
    how: 'an inbound message, then a reply through the public API that the sandbox provider sends (needs M2M_API_KEY with conversations:write)',
    async run(target) {
      const inbound = await inboundMessage(target);
      const reply = await publicClient(target.config).conversations.messages.reply({ conversationId: inbound.conversationId, text: 'Of course! See you tomorrow.' });
      return { conversationId: inbound.conversationId, messageId: reply.messageId, requestEventId: reply.requestEventId };
    },
  },
  'conversation.handoff.updated': {
    how: 'an inbound message, then a handoff to a human opened on its conversation',
    async run(target) {
      const inbound = await inboundMessage(target);
      const handoff = await target.admin.call<{ handoffId: string }>('POST', `/tenants/${target.tenant}/conversations/${inbound.conversationId}/handoff`, { action: 'open' });
      return { conversationId: inbound.conversationId, handoffId: handoff.handoffId };
    },
  },
  'crm.opportunity.created': { how: 'a lead and an opportunity created by the CRM', run: (target) => opportunity(target) },
  'crm.opportunity.updated': {
    how: 'a lead and an opportunity, then its stage moved to proposal',
    async run(target) {
      const created = await opportunity(target);
      await target.admin.call('PATCH', `/tenants/${target.tenant}/opportunities/${created.opportunityId}`, { stage: 'proposal' });
      return created;
    },
  },
  'knowledge.crawl.completed': {
    how: 'a synthetic event (a real crawl needs a reachable website)',
    run: (target) =>
      synthetic(target, 'knowledge.crawl.completed', {
        jobId: ids('crawl'),
        websiteId: ids('web'),
        websiteGenerationId: ids('gen'),
        status: 'completed',
        changes: { new: 3, changed: 1, removed: 0, same: 12 },
      }),
  },
  'knowledge.crawl.failed': {
    how: 'a synthetic event (a real crawl needs a reachable website)',
    run: (target) => synthetic(target, 'knowledge.crawl.failed', { jobId: ids('crawl'), websiteId: ids('web'), websiteGenerationId: ids('gen'), status: 'failed' }),
  },
  'webhook.subscription.disabled': {
    how: 'a synthetic event (the service disables a subscription only after days of failures)',
    run: (target) => synthetic(target, 'webhook.subscription.disabled', { subscriptionId: ids('sub'), reason: 'failing' }),
  },
};

export const triggerCommand: Command = {
  words: ['trigger'],
  usage: `<event-type> [--tenant <tenantId>] [--channel <channelId>]\n\nEvent types:\n${Object.entries(SIMULATIONS)
    .map(([type, simulation]) => `  ${type.padEnd(30)} ${simulation.how}`)
    .join('\n')}`,
  summary: 'Make the server produce a realistic event of this type through the admin API (needs M2M_ADMIN_TOKEN), to try a receiver end to end.',
  options: {
    tenant: { type: 'string', description: 'the tenant (default: the one `m2m dev` created)' },
    channel: { type: 'string', description: 'the channel of simulated guest messages (default: the dev WhatsApp channel, or a new one)' },
  },
  positionals: ['event-type'],
  async run({ values, positionals, json, config }) {
    const type = positionals[0];
    const simulation = Object.hasOwn(SIMULATIONS, type) ? SIMULATIONS[type] : undefined;
    if (!simulation) throw new UsageError(`unknown event type "${type}"; one of: ${Object.keys(SIMULATIONS).join(', ')}`);
    const tenant = values.string('tenant') ?? config.dev?.tenantId;
    if (!tenant) throw new UsageError('--tenant is required (or run `m2m dev`, whose tenant is the default)');
    const channelId = values.string('channel') ?? (tenant === config.dev?.tenantId ? config.dev.channelId : undefined);
    const result = await simulation.run({ admin: adminClient(config), config, tenant: encodeURIComponent(tenant), channelId });
    emit(json, { type, ...result }, () => `Triggered ${type}: ${simulation.how}\n${Object.entries(result).map(([name, value]) => `  ${name}: ${value}`).join('\n')}`);
  },
};
