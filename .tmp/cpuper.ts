// CPU per request (server process + all postgres backends), robust to other load: sequential requests over keep-alive.
import { readFileSync } from 'node:fs';
import { Agent, request } from 'undici';
import { call, newSchema, seedSubscription, startMinimal, startServer, stopAllChildren } from '../bench/procs.ts';
import { freePort } from '../bench/lib.ts';

const pg = 'postgres://postgres@127.0.0.1:5432/test';
const ticks = (pid: number) => { const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' '); return Number(f[11]) + Number(f[12]); };
const pgTicks = () => { let t = 0; for (const line of readFileSync('/proc/stat', 'utf8').split('\n')) void line; return t; };
void pgTicks;
import { execSync } from 'node:child_process';
const pgCpu = () => Number(execSync(`ps -C postgres -o times= | awk '{s+=$1} END {print s}'`).toString().trim()) * 100;
const agent = new Agent({ connections: 4 });
async function measure(label: string, url: string, headers: Record<string, string>, pid: number | undefined, n = 3000) {
  for (let i = 0; i < 300; i++) await (await request(url, { headers, dispatcher: agent })).body.text();
  const t0 = ticks(pid!); const p0 = pgCpu(); const w0 = Date.now();
  let bytes = 0;
  for (let i = 0; i < n; i += 4) await Promise.all([0, 1, 2, 3].map(async () => { const r = await request(url, { headers, dispatcher: agent }); bytes += (await r.body.text()).length; }));
  const server = ((ticks(pid!) - t0) * 10) / n; const pgms = ((pgCpu() - p0) * 10) / n;
  console.log(`${label.padEnd(40)} server ${server.toFixed(3)} ms/req, postgres ${pgms.toFixed(3)} ms/req (coarse), ${(bytes / n).toFixed(0)} B, wall ${((Date.now() - w0) / n).toFixed(3)} ms/req`);
}
const server = await startServer('cpuper', 'api', { DATABASE_URL: pg, DATABASE_SCHEMA: newSchema(pg) });
const seeded = await seedSubscription(server.baseUrl, `http://127.0.0.1:${await freePort()}/hook`);
for (let i = 0; i < 60; i++) await call(server.baseUrl, 'POST', `/admin/v1/tenants/${seeded.tenantId}/webhook-events`, { body: { type: 'message.created', data: { conversationId: 'c', messageId: `m${i}`, text: 'hi' } } });
const { tenantId } = await call<{ tenantId: string }>(server.baseUrl, 'POST', '/admin/v1/tenants', { body: { name: 'X' } });
const { key } = await call<{ key: string }>(server.baseUrl, 'POST', `/admin/v1/tenants/${tenantId}/api-keys`, { body: { name: 'b', scopes: ['channels:read', 'crm:sales:read', 'contacts:read'] } });
let channelId = '';
for (const kind of ['whatsapp', 'webchat', 'instagram']) channelId ||= (await call<{ channelId: string }>(server.baseUrl, 'POST', `/admin/v1/tenants/${tenantId}/channels`, { body: { kind, name: kind } })).channelId;
const { contactId, conversationId } = await call<{ contactId: string; conversationId: string }>(server.baseUrl, 'POST', `/admin/v1/tenants/${tenantId}/inbound-messages`, { body: { channelId, contact: { name: 'Ana', phone: '+525550000001' }, text: 'Hola' } });
for (let i = 0; i < 200; i++) { const { leadId } = await call<{ leadId: string }>(server.baseUrl, 'POST', `/admin/v1/tenants/${tenantId}/leads`, { body: { name: `L${i}`, conversationId } }); await call(server.baseUrl, 'POST', `/admin/v1/tenants/${tenantId}/opportunities`, { body: { leadId, stage: 'quote', status: 'open' } }); }
const minimal = await startMinimal('cpuper-min', { DATABASE_URL: pg, DATABASE_SCHEMA: newSchema(pg) });
const auth = { authorization: `Bearer ${key}` };
for (let round = 0; round < 2; round++) {
  await measure('minimal route (50 deliveries)', minimal.url, { authorization: `Bearer ${minimal.key}` }, minimal.child.pid);
  await measure('deliveries list (50)', `${server.baseUrl}/m2m/v1/webhooks/${seeded.subscriptionId}/deliveries?limit=50`, { authorization: `Bearer ${seeded.key}` }, server.pid);
  await measure('GET /channels', `${server.baseUrl}/m2m/v1/channels`, auth, server.pid);
  await measure('GET /crm/opportunities?limit=200', `${server.baseUrl}/m2m/v1/crm/opportunities?limit=200`, auth, server.pid);
  await measure('GET /contacts/{id}', `${server.baseUrl}/m2m/v1/contacts/${contactId}`, auth, server.pid);
}
await agent.close();
await stopAllChildren();
