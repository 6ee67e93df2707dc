import assert from 'node:assert/strict';
import { ALL_SCOPES } from '../../../src/auth/scopes.js';
import type { TestApp } from '../app.js';

/** One tenant with a key holding every scope and one of most things, so that generated ids can hit real rows. */
export interface FuzzTenant {
  tenantId: string;
  key: string;
  /** Ids of this tenant's rows, of every kind. */
  ids: string[];
  /** A real cursor of this tenant (a follow-up page), for tampering. */
  cursor: string;
}

async function ok<T>(app: TestApp, key: string, method: string, url: string, body?: unknown): Promise<T> {
  const res = await app.api(key, method, url, body);
  assert.ok(res.statusCode < 300, `${method} ${url} → ${res.statusCode} ${res.body}`);
  return res.json() as T;
}

export async function seedTenant(app: TestApp, name: string): Promise<FuzzTenant> {
  const { tenantId } = await app.admin<{ tenantId: string }>('POST', '/tenants', { name });
  const { key } = await app.admin<{ key: string }>('POST', `/tenants/${tenantId}/api-keys`, { name: 'fuzz', scopes: [...ALL_SCOPES] });
  const { channelId } = await app.admin<{ channelId: string }>('POST', `/tenants/${tenantId}/channels`, { kind: 'whatsapp', name: 'Line' });
  const inbound = await app.admin<{ conversationId: string; contactId: string; messageId: string }>('POST', `/tenants/${tenantId}/inbound-messages`, {
    channelId,
    contact: { name: 'Ana', phone: `+346${String(Math.floor(Math.random() * 1e8)).padStart(8, '0')}` },
    text: 'Hola',
  });
  const { leadId } = await app.admin<{ leadId: string }>('POST', `/tenants/${tenantId}/leads`, { name: 'Ana', conversationId: inbound.conversationId });
  const followUps = [];
  for (let i = 0; i < 2; i += 1) followUps.push(await ok<{ followUp: { followUpId: string } }>(app, key, 'POST', '/crm/follow-ups', { leadId, conversationId: inbound.conversationId }));
  const page = await ok<{ nextCursor: string }>(app, key, 'GET', '/crm/follow-ups?limit=1');
  const subscription = await ok<{ subscriptionId: string }>(app, key, 'POST', '/webhooks', { url: 'https://hooks.example.com/fuzz', events: ['message.created'] });
  await app.admin('POST', `/tenants/${tenantId}/webhook-events`, { type: 'message.created', data: {} });
  const { deliveries } = await ok<{ deliveries: Array<{ deliveryId: string }> }>(app, key, 'GET', `/webhooks/${subscription.subscriptionId}/deliveries`);
  const { integrationId } = await app.admin<{ integrationId: string }>('POST', `/tenants/${tenantId}/integrations`, { provider: 'pms', name: 'PMS' });
  const { source } = await ok<{ source: { sourceId: string } }>(app, key, 'POST', '/knowledge/sources', { sourceType: 'text', title: 'Pets', text: 'Dogs are welcome.' });
  const { folder } = await ok<{ folder: { folderId: string } }>(app, key, 'POST', '/knowledge/asset-folders', { title: 'Rooms' });
  return {
    tenantId,
    key,
    cursor: page.nextCursor,
    ids: [
      channelId,
      inbound.conversationId,
      inbound.contactId,
      inbound.messageId,
      leadId,
      ...followUps.map((f) => f.followUp.followUpId),
      subscription.subscriptionId,
      ...deliveries.map((d) => d.deliveryId),
      integrationId,
      source.sourceId,
      folder.folderId,
    ].filter((id): id is string => typeof id === 'string'),
  };
}

/**
 * A fingerprint of every row a tenant owns, table by table (every table with a `tenant_id` column), to show
 * that a refused request wrote nothing. Test-only SQL, read straight from the database.
 */
export async function tenantFingerprint(app: TestApp, tenantId: string): Promise<Record<string, string>> {
  const db = app.runtime.services.db;
  const tables = await db.query<{ table_name: string }>(
    `SELECT table_name FROM information_schema.columns
      WHERE column_name = 'tenant_id' AND table_schema = current_schema() ORDER BY table_name`,
  );
  const parts = tables.map(
    (t) => `(SELECT md5(coalesce(string_agg(x::text, '|' ORDER BY x::text), '')) FROM "${t.table_name}" x WHERE x.tenant_id = $1) AS "${t.table_name}"`,
  );
  const [row] = await db.query<Record<string, string>>(`SELECT ${parts.join(', ')}`, [tenantId]);
  return row;
}
