/**
 * The in-run reference for scenario 1: the "minimal route" the foundation issue plans by — a bare Fastify
 * route that hashes a bearer key, looks it up, and selects 50 delivery rows (two queries, rows sent as
 * node-postgres returns them, no schemas, no hooks). It runs in its own child process on its own database
 * (a fresh PostgreSQL schema or an in-memory PGlite, migrated with our migrations and seeded with 60
 * deliveries), so the real route can be compared with it on the same machine at the same moment.
 * The parent sends { dbEnv } over IPC and gets { port, key, path }.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import Fastify from 'fastify';
import { openDb } from '../src/db/driver.js';
import { migrate } from '../src/db/migrate.js';

interface Setup {
  dbEnv: Record<string, string>;
}

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

async function start({ dbEnv }: Setup): Promise<void> {
  const db = await openDb({ databaseUrl: dbEnv.DATABASE_URL, schema: dbEnv.DATABASE_SCHEMA, dataDir: dbEnv.DATA_DIR ?? 'memory://' });
  await migrate(db);
  const now = new Date().toISOString();
  const key = `m2m_live_${randomBytes(32).toString('base64url')}`;
  await db.query(`INSERT INTO tenants (id, name, created_at, updated_at) VALUES ('ten_minimal', 'Minimal', $1, $1)`, [now]);
  await db.query(
    `INSERT INTO api_keys (id, tenant_id, name, key_hash, key_prefix, scopes, created_at, updated_at)
     VALUES ('key_minimal', 'ten_minimal', 'minimal', $1, 'm2m_live_xxxxxx', ARRAY['webhooks:read'], $2, $2)`,
    [sha256(key), now],
  );
  await db.query(
    `INSERT INTO webhook_subscriptions (id, tenant_id, url, host, events, owner_api_key_id, secret_sealed, created_at, updated_at)
     VALUES ('whk_minimal', 'ten_minimal', 'https://hooks.example.com/x', 'hooks.example.com', ARRAY['message.created'], 'key_minimal', 'x', $1, $1)`,
    [now],
  );
  await db.query(
    `INSERT INTO webhook_events (id, tenant_id, type, occurred_at, body, created_at)
     SELECT 'evt_min_' || i, 'ten_minimal', 'message.created', $1, '{}', $1 FROM generate_series(1, 60) AS i`,
    [now],
  );
  await db.query(
    `INSERT INTO webhook_deliveries (id, tenant_id, event_id, event_type, subscription_id, status, next_attempt_at, created_at, updated_at)
     SELECT 'dlv_min_' || i, 'ten_minimal', 'evt_min_' || i, 'message.created', 'whk_minimal', 'pending', $1, $1::timestamptz + i * interval '1 ms', $1
     FROM generate_series(1, 60) AS i`,
    [now],
  );

  const app = Fastify({ logger: false });
  app.get('/deliveries', async (request, reply) => {
    const token = /^Bearer (\S+)$/.exec(request.headers.authorization ?? '')?.[1];
    const keys = token ? await db.query<{ tenant_id: string }>('SELECT tenant_id FROM api_keys WHERE key_hash = $1 AND revoked_at IS NULL', [sha256(token)]) : [];
    if (keys.length === 0) return reply.status(401).send({ error: 'unauthorized' });
    const rows = await db.query(
      `SELECT * FROM webhook_deliveries WHERE tenant_id = $1 AND subscription_id = 'whk_minimal' ORDER BY created_at DESC, id DESC LIMIT 50`,
      [keys[0].tenant_id],
    );
    return { deliveries: rows };
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  process.send?.({ port: (app.server.address() as AddressInfo).port, key, path: '/deliveries' });
  const stop = () => {
    void app.close().finally(() => db.close().finally(() => process.exit(0)));
    setTimeout(() => process.exit(0), 2_000).unref();
  };
  process.on('disconnect', stop);
  process.on('SIGTERM', stop);
}

process.once('message', (message: Setup) => void start(message));
