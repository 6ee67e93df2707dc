import { test } from 'node:test';
import assert from 'node:assert/strict';
import { openDb } from '../../src/db/driver.js';
import { listFunctions, listMigrations, migrateAll } from '../../src/db/migrate.js';
import { searchText } from '../../src/conversations/repo.js';
import { isolatedDatabase } from '../helpers/db.js';

// Migration 0042 moves the contact search text from conversations to contacts: a database written before it keeps
// every contact findable, with or without a conversation.
test('a database from before migration 0042 keeps each contact searchable', { timeout: 120_000 }, async () => {
  const isolated = await isolatedDatabase();
  const db = await openDb({ databaseUrl: isolated.env.DATABASE_URL, schema: isolated.env.DATABASE_SCHEMA, dataDir: isolated.env.DATA_DIR ?? '' });
  try {
    await migrateAll(db, { migrations: listMigrations().filter((m) => m.version < 42), functions: listFunctions() });
    const at = new Date('2026-11-01T10:00:00Z');
    await db.query(`INSERT INTO tenants (id, name, created_at, updated_at) VALUES ('ten_m', 'Hotel', $1, $1)`, [at]);
    await db.query(`INSERT INTO channels (id, tenant_id, kind, name, created_at, updated_at) VALUES ('ch_m', 'ten_m', 'whatsapp', 'WA', $1, $1)`, [at]);
    const contacts = [
      { id: 'ct_1', name: 'Zoë Martínez', phone_e164: '+525512345678', handle: null },
      { id: 'ct_2', name: null, phone_e164: null, handle: 'Guest.Two' },
      { id: 'ct_3', name: 'Ana Ruiz', phone_e164: '+34600111222', handle: null },
    ];
    for (const c of contacts) {
      await db.query(`INSERT INTO contacts (id, tenant_id, name, phone_e164, handle, created_at, updated_at) VALUES ($1, 'ten_m', $2, $3, $4, $5, $5)`, [
        c.id,
        c.name,
        c.phone_e164,
        c.handle,
        at,
      ]);
    }
    // The first two have conversations (with the search text the application wrote); the third has none.
    for (const c of contacts.slice(0, 2)) {
      await db.query(
        `INSERT INTO conversations (id, tenant_id, channel_id, channel_kind, contact_id, last_message_at, search_text, created_at, updated_at)
         VALUES ($1, 'ten_m', 'ch_m', 'whatsapp', $2, $3, $4, $3, $3)`,
        [`conv_${c.id}`, c.id, at, searchText(c)],
      );
    }

    await migrateAll(db);
    const rows = await db.query<{ id: string; search_text: string }>(`SELECT id, search_text FROM contacts ORDER BY id`);
    assert.deepEqual(
      rows,
      contacts.map((c) => ({ id: c.id, search_text: searchText(c) })),
    );
    const [column] = await db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = 'conversations' AND column_name = 'search_text'`,
    );
    assert.equal(column.n, 0, 'conversations no longer carry the search text');
  } finally {
    await db.close();
    await isolated.drop();
  }
});
