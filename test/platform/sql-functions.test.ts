import { test } from 'node:test';
import assert from 'node:assert/strict';
import { openDb, type Db } from '../../src/db/driver.js';
import { DEFINES_FUNCTION, checksumOf, listFunctions, listMigrations, migrateAll, migrationsApplied, orderByCalls, type FunctionFile } from '../../src/db/migrate.js';
import { OutboundQueue } from '../../src/messaging/outbound.js';
import { isolatedDatabase } from '../helpers/db.js';

// Database functions live one per file (src/<domain>/sql/<name>.sql) and are applied after the migrations when
// their checksum changes (docs/decisions.md, "Functions have one file each").

async function withDatabase(run: (db: Db) => Promise<void>): Promise<void> {
  const isolated = await isolatedDatabase();
  const db = await openDb({ databaseUrl: isolated.env.DATABASE_URL, schema: isolated.env.DATABASE_SCHEMA, dataDir: isolated.env.DATA_DIR ?? '' });
  try {
    await run(db);
  } finally {
    await db.close();
    await isolated.drop();
  }
}

const exec = (db: Db, sql: string): Promise<void> => db.transaction((tx) => tx.exec(sql));

class RolledBack extends Error {}

/** The definitions of every function a file defines, as the database holds them in the current schema. */
async function definitionsOf(db: Pick<Db, 'query'>, file: FunctionFile): Promise<string[]> {
  const names = [...file.sql.replace(/--[^\n]*/g, '').matchAll(/CREATE OR REPLACE FUNCTION\s+([a-z_][a-z0-9_]*)\s*\(/gi)].map((m) => m[1].toLowerCase());
  const rows = await db.query<{ def: string }>(
    `SELECT pg_get_functiondef(p.oid) AS def FROM pg_proc p
     WHERE p.proname = ANY ($1::text[]) AND p.pronamespace = (SELECT oid FROM pg_namespace WHERE nspname = current_schema())
     ORDER BY p.proname, pg_get_function_identity_arguments(p.oid)`,
    [names],
  );
  return rows.map((r) => r.def);
}

/**
 * The function files whose definition differs from the database's: each file is applied in a transaction that is
 * rolled back, and what the database held before is compared with what the file makes of it.
 */
async function drift(db: Db, files: readonly FunctionFile[]): Promise<string[]> {
  const differ: string[] = [];
  for (const file of files) {
    await db
      .transaction(async (tx) => {
        const before = await definitionsOf(tx, file);
        await tx.exec(file.sql);
        const after = await definitionsOf(tx, file);
        if (before.length === 0 || JSON.stringify(before) !== JSON.stringify(after)) differ.push(file.name);
        throw new RolledBack();
      })
      .catch((error: unknown) => {
        if (!(error instanceof RolledBack)) throw error;
      });
  }
  return differ;
}

test('every database function has one file, applied after the migrations; a second run applies nothing', { timeout: 120_000 }, async () => {
  await withDatabase(async (db) => {
    const files = listFunctions();
    assert.ok(files.length >= 12, 'the functions of the migrations have their files');
    const first = await migrateAll(db);
    assert.deepEqual(first.migrations, listMigrations().map((m) => m.version));
    // Each once; a file a migration uses (0031's generated columns) is applied just before that migration.
    assert.deepEqual([...first.functions].sort(), files.map((f) => f.name).sort());
    assert.equal(await migrationsApplied(db), true);

    const recorded = await db.query<{ name: string; checksum: string }>('SELECT name, checksum FROM schema_functions ORDER BY name');
    assert.deepEqual(recorded, files.map((f) => ({ name: f.name, checksum: f.checksum })).sort((a, b) => a.name.localeCompare(b.name)));
    assert.deepEqual(await drift(db, files), [], 'the database holds each function as its file defines it');

    assert.deepEqual(await migrateAll(db), { migrations: [], functions: [] });

    // No function of ours in the schema is left without a file (extensions' functions are not ours).
    const defined = await db.query<{ name: string }>(
      `SELECT DISTINCT p.proname AS name FROM pg_proc p WHERE p.pronamespace = (SELECT oid FROM pg_namespace WHERE nspname = current_schema())
         AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.objid = p.oid AND d.deptype = 'e') ORDER BY 1`,
    );
    const named = new Set(files.flatMap((f) => [...f.sql.matchAll(/CREATE OR REPLACE FUNCTION\s+([a-z_][a-z0-9_]*)/gi)].map((m) => m[1].toLowerCase())));
    assert.deepEqual(defined.map((r) => r.name).filter((name) => !named.has(name)), []);
  });
});

test('a changed file is applied again, and a function that differs from its file is found', { timeout: 120_000 }, async () => {
  await withDatabase(async (db) => {
    await migrateAll(db);
    const files = listFunctions();
    const changed = files.map((f) => {
      if (f.name !== 'api_key_in_force') return f;
      const sql = f.sql.replace('p_expires_at > p_at', 'p_at < p_expires_at');
      assert.notEqual(sql, f.sql);
      return { ...f, sql, checksum: checksumOf(sql) };
    });
    assert.deepEqual(await migrateAll(db, { migrations: listMigrations(), functions: changed }), { migrations: [], functions: ['api_key_in_force'] });
    assert.equal(await migrationsApplied(db), false, 'this build does not hold the function as its file has it');
    assert.deepEqual(await drift(db, files), ['api_key_in_force'], 'the database and the file disagree');
    assert.deepEqual(await drift(db, changed), []);

    // Back to the file as it is: re-applied, and the function agrees with it again.
    assert.deepEqual((await migrateAll(db)).functions, ['api_key_in_force']);
    assert.deepEqual(await drift(db, files), []);
    assert.equal(await migrationsApplied(db), true);

    // A change made behind the files' back is found too.
    await exec(db, `CREATE OR REPLACE FUNCTION api_key_grants(p_revoked_at timestamptz, p_expires_at timestamptz, p_scopes text[], p_at timestamptz, p_granting text[])
      RETURNS boolean LANGUAGE sql IMMUTABLE AS $$ SELECT true $$`);
    assert.deepEqual(await drift(db, files), ['api_key_grants']);
  });
});

test('function files are created after the functions they call', () => {
  const file = (name: string, sql: string): FunctionFile => ({ name, file: `x/sql/${name}.sql`, sql, checksum: checksumOf(sql) });
  const ordered = orderByCalls([
    file('a_outer', 'SELECT b_middle(1)'),
    file('b_middle', '-- not a call: a_outer(\nSELECT c_inner(2)'),
    file('c_inner', 'SELECT 1'),
  ]);
  assert.deepEqual(ordered.map((f) => f.name), ['c_inner', 'b_middle', 'a_outer']);
  assert.throws(() => orderByCalls([file('a', 'SELECT b()'), file('b', 'SELECT a()')]), /cycle/);
  const real = listFunctions().map((f) => f.name);
  assert.ok(real.indexOf('api_key_in_force') < real.indexOf('api_key_grants'));
  assert.ok(real.indexOf('webhook_emit') < real.indexOf('outbound_queue'));
});

test("a database made by the previous release (migrations 0001-0027, their functions) upgrades: files applied, foreign keys back, keys renamed", { timeout: 120_000 }, async () => {
  await withDatabase(async (db) => {
    // The previous release's migrate(): its migrations in one text, and no function files.
    const previous = listMigrations().filter((m) => m.version <= 27);
    await exec(db, `CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now());
      ${previous.map((m) => `${m.sql}\n;\nINSERT INTO schema_migrations (version, name) VALUES (${m.version}, '${m.name}');`).join('\n')}`);
    // A conversation with an outbound message written by the previous release's functions.
    const at = new Date('2026-01-02T03:04:05Z');
    await exec(db, `INSERT INTO tenants (id, name, created_at, updated_at) VALUES ('ten_a', 'A', now(), now());
      INSERT INTO channels (id, tenant_id, kind, name, created_at, updated_at) VALUES ('chn_a', 'ten_a', 'webchat', 'Web', now(), now());
      INSERT INTO contacts (id, tenant_id, handle, created_at, updated_at) VALUES ('ctc_a', 'ten_a', 'guest', now(), now());
      INSERT INTO conversations (id, tenant_id, channel_id, channel_kind, contact_id, last_message_at, created_at, updated_at)
      VALUES ('cnv_a', 'ten_a', 'chn_a', 'webchat', 'ctc_a', now(), now(), now())`);
    const message = new OutboundQueue(5).prepare(at, { tenantId: 'ten_a', conversationId: 'cnv_a', channelId: 'chn_a', channelKind: 'webchat', recipientPhone: null, text: 'hello' });
    // The previous release's outbound_queue took the provider from the message (CHANNEL_PROVIDER's).
    await db.query('SELECT * FROM outbound_queue($1::jsonb)', [JSON.stringify({ ...message, provider: 'sandbox' })]);
    // Keys of the previous protocol: a completed reply's (named by the service) and an abandoned in-progress claim.
    await exec(db, `INSERT INTO idempotency_keys (tenant_id, operation, key, request_hash, state, response_status, response_body, locked_at, created_at, expires_at)
      VALUES ('ten_a', 'conversations.reply', 'k1', 'h1', 'completed', 202, '{"ok": true}', now(), now(), now() + interval '1 day'),
             ('ten_a', 'conversations.start', 'k2', 'h2', 'in_progress', NULL, NULL, now(), now(), now() + interval '1 day')`);
    const [planned] = await db.query<{ config: string[] | null }>(`SELECT proconfig AS config FROM pg_proc WHERE proname = 'conversation_replies' AND pronamespace = current_schema()::regnamespace`);
    assert.ok(planned.config?.includes('enable_seqscan=off'), 'the previous release set planner options on it');

    const upgrade = await migrateAll(db);
    assert.deepEqual(upgrade.migrations, listMigrations().filter((m) => m.version > 27).map((m) => m.version));
    assert.deepEqual([...upgrade.functions].sort(), listFunctions().map((f) => f.name).sort());
    assert.deepEqual(await drift(db, listFunctions()), []);
    assert.equal(await migrationsApplied(db), true);

    const [replaced] = await db.query<{ config: string[] | null }>(`SELECT proconfig AS config FROM pg_proc WHERE proname = 'conversation_replies' AND pronamespace = current_schema()::regnamespace`);
    assert.ok(!replaced.config?.some((setting) => setting.startsWith('enable_')), 'planner options are gone with the file');
    const keys = await db.query<{ name: string }>(
      `SELECT conname AS name FROM pg_constraint WHERE contype = 'f' AND convalidated
         AND conrelid IN ('messages'::regclass, 'message_requests'::regclass, 'webhook_events'::regclass, 'idempotency_keys'::regclass) ORDER BY 1`,
    );
    for (const name of ['messages_conversation_fkey', 'message_requests_conversation_fkey', 'message_requests_reply_id_fkey', 'webhook_events_tenant_id_fkey', 'idempotency_keys_tenant_id_fkey']) {
      assert.ok(keys.some((k) => k.name === name), `${name} is back, validated`);
    }
    assert.deepEqual(
      await db.query('SELECT operation, key, response_status FROM idempotency_keys ORDER BY key'),
      [{ operation: 'replyToConversation', key: 'k1', response_status: 202 }],
      'keys are named by operationId, and in-progress claims are gone',
    );
    await assert.rejects(db.query(`INSERT INTO messages (id, tenant_id, conversation_id, direction, text, created_at) VALUES ('msg_x', 'ten_a', 'cnv_missing', 'outbound', 'x', now())`), /foreign key/);
    // The keys carry the tenant: a row naming another tenant's conversation, or a request on another channel than
    // its conversation's, is refused.
    await exec(db, `INSERT INTO tenants (id, name, created_at, updated_at) VALUES ('ten_b', 'B', now(), now());
      INSERT INTO channels (id, tenant_id, kind, name, created_at, updated_at) VALUES ('chn_b', 'ten_a', 'webchat', 'Web 2', now(), now())`);
    await assert.rejects(db.query(`INSERT INTO messages (id, tenant_id, conversation_id, direction, text, created_at) VALUES ('msg_y', 'ten_b', 'cnv_a', 'outbound', 'x', now())`), /foreign key/);
    await assert.rejects(
      db.query(`INSERT INTO message_requests (id, tenant_id, conversation_id, reply_id, channel_id, channel_kind, text, status, provider, created_at, updated_at)
                SELECT 'req_y', 'ten_a', 'cnv_a', m.id, 'chn_b', 'webchat', 'x', 'queued', 'webchat', now(), now() FROM messages m WHERE m.conversation_id = 'cnv_a' LIMIT 1`),
      /foreign key/,
    );
  });
});

test('migrations after 0027 change the schema only: none defines a function (functions have their files)', () => {
  const defining = listMigrations().filter((m) => m.version > 27 && DEFINES_FUNCTION.test(m.sql));
  assert.deepEqual(defining.map((m) => m.name), []);
});
