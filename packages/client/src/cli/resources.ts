import type { EventEnvelope, WebhookDelivery, WebhookSubscription } from '../generated.js';
import { adminClient } from './admin.js';
import { publicClient } from './client.js';
import type { Command } from './command.js';
import { UsageError } from './errors.js';
import { emit, table } from './output.js';

const DELIVERY_STATUSES = ['pending', 'delivered', 'failed', 'canceled'] as const;

function deliveryStatus(value: string | undefined): WebhookDelivery['status'] | undefined {
  if (value === undefined) return undefined;
  const status = DELIVERY_STATUSES.find((known) => known === value);
  if (!status) throw new UsageError(`--status must be one of ${DELIVERY_STATUSES.join(', ')}`);
  return status;
}

const eventRows = (events: EventEnvelope[]) => events.map((event) => [event.occurredAt, event.type, event.eventId]);
/** `http_status 500`, `timeout`, …: why the last attempt failed, with the receiver's status when it answered. */
function failure(code: string | undefined, httpStatus?: number): string {
  if (code === undefined) return '-';
  return httpStatus === undefined ? code : `${code} ${httpStatus}`;
}

const deliveryRows = (deliveries: WebhookDelivery[]) =>
  deliveries.map((delivery) => [
    delivery.deliveryId,
    delivery.eventType,
    delivery.eventId,
    delivery.status,
    delivery.attempts,
    failure(delivery.failureCode, delivery.httpStatus),
    delivery.nextAttemptAt ?? '-',
  ]);

/** Active, off, or disabled by the service (and why): a subscription that stopped receiving must say so. */
function subscriptionState(subscription: WebhookSubscription): string {
  if (subscription.active) return 'active';
  return subscription.disabledReason ? `disabled (${subscription.disabledReason})` : 'inactive';
}

/** `ok` while the last attempt succeeded; otherwise how many attempts failed in a row, since when and why. */
function health({ health }: WebhookSubscription): string {
  if (health.consecutiveFailures === 0) return health.lastSuccessAt ? `ok (last success ${health.lastSuccessAt})` : 'no attempt yet';
  const since = health.lastSuccessAt ? `, last success ${health.lastSuccessAt}` : ', never succeeded';
  return `${health.consecutiveFailures} failing (${failure(health.lastFailureCode)} at ${health.lastFailureAt ?? '?'}${since})`;
}

const subscriptionRows = (subscriptions: WebhookSubscription[]) =>
  subscriptions.map((subscription) => [subscription.subscriptionId, subscription.url, subscriptionState(subscription), health(subscription), subscription.events.join(',')]);

/** `m2m events …` and `m2m webhooks …`: thin commands over the SDK. */
export const resourceCommands: Command[] = [
  {
    words: ['events', 'list'],
    usage: '[--types a,b] [--limit n] [--cursor c]',
    summary: 'List events of the last 30 days, oldest first (GET /events); follow nextCursor for newer ones.',
    options: {
      types: { type: 'string', description: 'only these event types (comma-separated)' },
      limit: { type: 'string', description: 'events per page (1..200, default 50)' },
      cursor: { type: 'string', description: 'the nextCursor of an earlier page' },
    },
    async run({ values, json, config }) {
      const page = await publicClient(config).events.list({ types: values.string('types'), limit: values.integer('limit'), cursor: values.string('cursor') });
      emit(json, page, () => `${table(['OCCURRED AT', 'TYPE', 'EVENT ID'], eventRows(page.events))}\nnext cursor: ${page.nextCursor}`);
    },
  },
  {
    words: ['events', 'get'],
    usage: '<eventId>',
    summary: 'Show one event envelope (GET /events/{eventId}).',
    options: {},
    positionals: ['eventId'],
    async run({ positionals, json, config }) {
      const { event } = await publicClient(config).events.get({ eventId: positionals[0] });
      emit(json, event, () => JSON.stringify(event, null, 2));
    },
  },
  {
    words: ['webhooks', 'list'],
    usage: '',
    summary: "List the tenant's webhook subscriptions with their health (GET /webhooks).",
    options: {},
    async run({ json, config }) {
      const { subscriptions } = await publicClient(config).webhooks.list();
      emit(json, { subscriptions }, () => table(['SUBSCRIPTION ID', 'URL', 'STATE', 'HEALTH', 'EVENTS'], subscriptionRows(subscriptions)));
    },
  },
  {
    words: ['webhooks', 'deliveries'],
    usage: '<subscriptionId> [--status failed] [--limit n] [--cursor c]',
    summary:
      "List a subscription's deliveries, newest first, with why the last attempt failed and when the next one is due " +
      '(GET /webhooks/{subscriptionId}/deliveries).',
    options: {
      status: { type: 'string', description: 'pending, delivered, failed or canceled' },
      limit: { type: 'string', description: 'deliveries per page' },
      cursor: { type: 'string', description: 'the nextCursor of an earlier page' },
    },
    positionals: ['subscriptionId'],
    async run({ values, positionals, json, config }) {
      const page = await publicClient(config).webhooks.deliveries.list({
        subscriptionId: positionals[0],
        status: deliveryStatus(values.string('status')),
        limit: values.integer('limit'),
        cursor: values.string('cursor'),
      });
      emit(json, page, () => table(['DELIVERY ID', 'TYPE', 'EVENT ID', 'STATUS', 'ATTEMPTS', 'FAILURE', 'NEXT ATTEMPT'], deliveryRows(page.deliveries)));
    },
  },
  {
    words: ['webhooks', 'retry'],
    usage: '<subscriptionId> <deliveryId>',
    summary: 'Send a delivery again now (POST /webhooks/{subscriptionId}/deliveries/{deliveryId}/retry).',
    options: {},
    positionals: ['subscriptionId', 'deliveryId'],
    async run({ positionals, json, config }) {
      const { delivery } = await publicClient(config).webhooks.deliveries.retry({ subscriptionId: positionals[0], deliveryId: positionals[1] });
      emit(json, { delivery }, () => `delivery ${delivery.deliveryId} is ${delivery.status}`);
    },
  },
  {
    words: ['webhooks', 'recover'],
    usage: '<subscriptionId> --since <date-time> [--until <date-time>]',
    summary: 'After a receiver outage: restart every failed delivery whose event occurred in [since, until) (POST /webhooks/{subscriptionId}/recover).',
    options: {
      since: { type: 'string', description: 'ISO 8601 date-time, within the last 30 days (required)' },
      until: { type: 'string', description: 'ISO 8601 date-time (default: now)' },
    },
    positionals: ['subscriptionId'],
    async run({ values, positionals, json, config }) {
      const result = await publicClient(config).webhooks.recover({ subscriptionId: positionals[0], since: values.required('since'), until: values.string('until') });
      emit(json, result, () => `${result.recovered} failed deliveries restarted`);
    },
  },
  {
    words: ['admin', 'tenants', 'create'],
    usage: '--name <name> [--timezone <IANA zone>]',
    summary: 'Create a tenant through the admin API (needs M2M_ADMIN_TOKEN).',
    options: {
      name: { type: 'string', description: "the business's name (required)" },
      timezone: { type: 'string', description: 'IANA time zone, e.g. Europe/Madrid (default UTC)' },
    },
    async run({ values, json, config }) {
      const tenant = await adminClient(config).call<{ tenantId: string; name: string; timezone: string }>('POST', '/tenants', {
        name: values.required('name'),
        timezone: values.string('timezone'),
      });
      emit(json, tenant, () => `tenant ${tenant.tenantId} (${tenant.name}, ${tenant.timezone})`);
    },
  },
  {
    words: ['admin', 'keys', 'create'],
    usage: '--tenant <tenantId> --scopes a,b [--name <name>] [--expires-at <date-time>]',
    summary: 'Create an API key for a tenant (needs M2M_ADMIN_TOKEN); its secret is shown only here.',
    options: {
      tenant: { type: 'string', description: 'the tenant id (required)' },
      scopes: { type: 'string', description: 'comma-separated scopes, e.g. webhooks:read,conversations:read (required)' },
      name: { type: 'string', description: 'a name to recognise the key by (default "m2m cli")' },
      'expires-at': { type: 'string', description: 'ISO 8601 date-time after which the key stops working' },
    },
    async run({ values, json, config }) {
      const tenantId = encodeURIComponent(values.required('tenant'));
      const scopes = values.list('scopes');
      if (!scopes) throw new UsageError('--scopes is required');
      const key = await adminClient(config).call<{ apiKeyId: string; key: string; scopes: string[] }>('POST', `/tenants/${tenantId}/api-keys`, {
        name: values.string('name') ?? 'm2m cli',
        scopes,
        expiresAt: values.string('expires-at'),
      });
      emit(json, key, () => `key ${key.apiKeyId} (${key.scopes.join(', ')}):\n${key.key}`);
    },
  },
];
