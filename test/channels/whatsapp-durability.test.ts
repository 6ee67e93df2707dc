import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { setImmediate as setImmediatePromise } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import pino from 'pino';
import { ManualClock } from '../../src/clock.js';
import { loadConfig } from '../../src/config.js';
import { createRuntime, type Runtime } from '../../src/runtime.js';
import { signMetaPayload } from '../../src/channels/providers/meta/signature.js';
import { ADMIN_TOKEN, eventually, startTestApp } from '../helpers/app.js';
import { sharedDatabase } from '../helpers/shared-db.js';

// A stored callback survives its worker's death (re-claimed after the lease, nothing lost, nothing doubled), and a
// callback of 5,000 entries is acknowledged once stored and processed in batches, other requests answered between them.

const APP_SECRET = 'durability-app-secret';
const PHONE_NUMBER_ID = '106540352299001';

/** One callback of `count` entries, each one guest's text message (guests repeat every 50). */
function bigCallback(count: number, phoneNumberId: string) {
  const now = Math.floor(Date.now() / 1000);
  return {
    object: 'whatsapp_business_account',
    entry: Array.from({ length: count }, (_, i) => ({
      id: '102290129340398',
      changes: [
        {
          field: 'messages',
          value: {
            messaging_product: 'whatsapp',
            metadata: { display_phone_number: '15550783881', phone_number_id: phoneNumberId },
            contacts: [{ profile: { name: `Guest ${i % 50}` }, wa_id: `1415555${String(1000 + (i % 50))}` }],
            messages: [{ from: `1415555${String(1000 + (i % 50))}`, id: `wamid.BIG${i}`, timestamp: String(now - count + i), type: 'text', text: { body: `message ${i} 🌊` } }],
          },
        },
      ],
    })),
  };
}

type Injector = Runtime['app'];

async function setup(app: Injector): Promise<string> {
  const admin = async <T>(method: 'POST', url: string, body: unknown): Promise<T> => {
    const res = await app.inject({ method, url: `/admin/v1${url}`, headers: { authorization: `Bearer ${ADMIN_TOKEN}` }, payload: body as Record<string, unknown> });
    assert.ok(res.statusCode < 300, res.body);
    return res.json() as T;
  };
  const { tenantId } = await admin<{ tenantId: string }>('POST', '/tenants', { name: 'Durable hotel' });
  await admin('POST', `/tenants/${tenantId}/channels`, { kind: 'whatsapp', name: 'Cloud', provider: 'whatsapp_cloud', connection: { phoneNumberId: PHONE_NUMBER_ID, wabaId: '1' } });
  return tenantId;
}

async function post(app: Injector, payload: unknown) {
  const raw = JSON.stringify(payload);
  return app.inject({ method: 'POST', url: '/providers/meta/webhook', headers: { 'content-type': 'application/json', 'x-hub-signature-256': signMetaPayload(APP_SECRET, raw) }, payload: raw });
}

async function counts(runtime: Runtime, tenantId: string) {
  const [row] = await runtime.services.db.query<{ messages: number; events: number; pending: number }>(
    `SELECT (SELECT count(*)::int FROM messages WHERE tenant_id = $1) AS messages,
            (SELECT count(*)::int FROM webhook_events WHERE tenant_id = $1 AND type = 'message.created') AS events,
            (SELECT count(*)::int FROM provider_callbacks WHERE processed_at IS NULL) AS pending`,
    [tenantId],
  );
  return row;
}

test('a worker killed mid-callback: the callback is re-claimed after its lease; nothing lost, nothing doubled', { timeout: 180_000 }, async () => {
  const database = await sharedDatabase();
  const open = () =>
    createRuntime(loadConfig({ ADMIN_TOKEN, RATE_LIMIT_RPS: '100000', RATE_LIMIT_BURST: '100000', JOB_POLL_INTERVAL_MS: '50', META_APP_SECRET: APP_SECRET, ...database.env }, []), {
      logger: pino({ level: 'silent' }),
    });
  let runtime: Runtime | undefined = await open();
  try {
    // 1. Stored and acknowledged; no worker running.
    const tenantId = await setup(runtime.app);
    const res = await post(runtime.app, bigCallback(250, PHONE_NUMBER_ID));
    assert.equal(res.statusCode, 200, res.body);
    assert.deepEqual(res.json(), { received: true });
    await runtime.close();
    runtime = undefined; // PGlite: one process at a time

    // 2. A worker claims it, commits its first batch and is killed.
    const child = spawn(process.execPath, ['--import', 'tsx', fileURLToPath(new URL('../fixtures/callback-crash-worker.ts', import.meta.url))], {
      env: { ...process.env, ...database.env },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    try {
      await new Promise<void>((resolve, reject) => {
        let out = '';
        child.stdout.on('data', (chunk: Buffer) => {
          out += chunk.toString();
          if (out.includes('batch committed')) resolve();
        });
        child.on('exit', (code) => reject(new Error(`worker exited early with ${code}`)));
        setTimeout(() => reject(new Error('the worker did not commit a batch')), 90_000);
      });
    } finally {
      child.kill('SIGKILL');
      await new Promise((resolve) => (child.exitCode !== null || child.signalCode !== null ? resolve(undefined) : child.once('exit', resolve)));
    }

    // 3. Part written, the callback still pending; the next worker finishes it exactly once.
    runtime = await open();
    const partial = await counts(runtime, tenantId);
    assert.equal(partial.messages, 100, 'the first batch committed');
    assert.equal(partial.pending, 1);
    await runtime.startWorkers();
    const rt = runtime;
    await eventually(async () => (await counts(rt, tenantId)).pending === 0, 60_000, 'the callback to be re-claimed and processed');
    const done = await counts(runtime, tenantId);
    assert.equal(done.messages, 250);
    assert.equal(done.events, 250);
  } finally {
    await runtime?.close();
    await database.drop();
  }
});

test('a callback of 5,000 entries: acknowledged at once, stored once, processed in batches without holding the event loop', { timeout: 300_000 }, async () => {
  const app = await startTestApp({ startWorkers: true, env: { META_APP_SECRET: APP_SECRET } });
  try {
    const tenantId = await setup(app.runtime.app);
    const res = await post(app.runtime.app, bigCallback(5_000, PHONE_NUMBER_ID));
    assert.equal(res.statusCode, 200, res.body);
    // Acknowledged once stored, before any of it is processed: processing is the workers' job.
    assert.ok((await counts(app.runtime, tenantId)).messages < 5_000, 'the 200 did not wait for the processing');
    // While the batches are applied the server answers other requests: some are answered with part of the
    // callback processed, which one long synchronous stretch (or one transaction) could never do.
    const seenMidway = new Set<number>();
    for (;;) {
      const health = await app.runtime.app.inject({ method: 'GET', url: '/healthz' });
      assert.equal(health.statusCode, 200);
      const now = await counts(app.runtime, tenantId);
      if (now.pending === 0) break;
      if (now.messages > 0 && now.messages < 5_000) seenMidway.add(now.messages);
      await setImmediatePromise();
    }
    assert.ok(seenMidway.size >= 2, `requests were answered between batches (${[...seenMidway].join(', ')} messages applied at the time)`);
    const done = await counts(app.runtime, tenantId);
    assert.equal(done.messages, 5_000);
    assert.equal(done.events, 5_000);
    // A redelivery of the whole callback writes nothing.
    assert.equal((await post(app.runtime.app, bigCallback(5_000, PHONE_NUMBER_ID))).statusCode, 200);
    await eventually(async () => (await counts(app.runtime, tenantId)).pending === 0, 240_000, 'the redelivery processed');
    assert.equal((await counts(app.runtime, tenantId)).messages, 5_000);
  } finally {
    await app.close();
  }
});

test('a processed callback is kept 7 days, then the maintenance job removes it; one still unprocessed is kept', { timeout: 120_000 }, async () => {
  const DAY = 24 * 60 * 60 * 1000;
  const clock = new ManualClock('2026-03-01T08:00:00.000Z');
  const app = await startTestApp({ clock, startWorkers: true, env: { META_APP_SECRET: APP_SECRET } });
  try {
    const { db } = app.runtime.services;
    /** Waits until the maintenance job has run at the current clock time (it reschedules itself an hour later). */
    const maintenanceRanNow = async () => {
      const expected = clock.now().getTime() + 60 * 60 * 1000;
      app.runtime.runner.wake();
      await eventually(async () => {
        const rows = await db.query<{ run_at: Date }>(`SELECT run_at FROM jobs WHERE task = 'maintenance' AND state = 'queued'`);
        return rows.length === 1 && rows[0].run_at.getTime() === expected;
      }, 60_000, 'the maintenance job to run');
    };
    const stored = async () => (await db.query<{ id: string; processed: boolean }>('SELECT id, processed_at IS NOT NULL AS processed FROM provider_callbacks ORDER BY processed_at NULLS LAST, id'));
    await maintenanceRanNow();
    const tenantId = await setup(app.runtime.app);
    assert.equal((await post(app.runtime.app, bigCallback(2, PHONE_NUMBER_ID))).statusCode, 200);
    await eventually(async () => (await counts(app.runtime, tenantId)).pending === 0, 60_000, 'the callback processed');
    // One more stored callback whose processing has not happened (its job is gone, as after a failed attempt).
    await db.query(`INSERT INTO provider_callbacks (id, provider, object, body, received_at) VALUES ('cb_unprocessed', 'meta', 'whatsapp_business_account', '{}', $1)`, [clock.now()]);
    assert.deepEqual((await stored()).map((row) => row.processed), [true, false]);

    clock.advance(6 * DAY);
    await maintenanceRanNow();
    assert.equal((await stored()).length, 2, 'kept for 7 days');

    clock.advance(2 * DAY);
    await maintenanceRanNow();
    assert.deepEqual(await stored(), [{ id: 'cb_unprocessed', processed: false }]);
    assert.equal((await counts(app.runtime, tenantId)).messages, 2, 'the messages stay');
  } finally {
    await app.close();
  }
});
