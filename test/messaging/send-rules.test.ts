import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import type { Db } from '../../src/db/driver.js';
import { sendRefusal } from '../../src/messaging/send-rules.js';
import { migratedDatabase } from '../helpers/db.js';

// The send rules, each in one function file: send_refusal, reply_window, message_status_moves.

let db: Db;
let close: () => Promise<void>;
before(async () => {
  ({ db, close } = await migratedDatabase());
});
after(() => close());

test('send_refusal: channel, then opt-out, then consent where required; facts not read are not checked', async () => {
  assert.equal(await sendRefusal(db, { channelAvailable: false, optedOut: true, consentRequired: true, consent: false }), 'channel_unavailable');
  assert.equal(await sendRefusal(db, { channelAvailable: true, optedOut: true, consentRequired: true, consent: false }), 'recipient_opted_out');
  assert.equal(await sendRefusal(db, { channelAvailable: true, optedOut: false, consentRequired: true, consent: false }), 'recipient_no_consent');
  assert.equal(await sendRefusal(db, { channelAvailable: true, optedOut: false, consentRequired: false, consent: false }), undefined);
  assert.equal(await sendRefusal(db, { channelAvailable: true }), undefined);
  assert.equal(await sendRefusal(db, { optedOut: true }), 'recipient_opted_out');
});

test('reply_window: 24 hours on WhatsApp, Messenger and Instagram, none on webchat; closed without an inbound message', async () => {
  const window = async (kind: string, last: string | null, at: string) =>
    (await db.query<{ hours: number | null; closed_at: Date | null; open: boolean }>('SELECT * FROM reply_window($1, $2, NULL, $3)', [kind, last, at]))[0];
  const last = '2026-03-01T10:00:00.000Z';
  for (const kind of ['whatsapp', 'messenger', 'instagram']) {
    assert.deepEqual(await window(kind, last, '2026-03-02T09:59:59.999Z'), { hours: 24, closed_at: new Date('2026-03-02T10:00:00.000Z'), open: true });
    assert.equal((await window(kind, last, '2026-03-02T10:00:00.000Z')).open, false, 'closed at exactly 24 hours');
    assert.deepEqual(await window(kind, null, last), { hours: 24, closed_at: null, open: false });
  }
  assert.deepEqual(await window('webchat', null, last), { hours: null, closed_at: null, open: true });
});

test('message_status_moves: forward only; failed from any state but read; nothing out of failed', async () => {
  const states = ['queued', 'sent', 'delivered', 'read', 'failed'];
  const rows = await db.query<{ from: string; to: string; moves: boolean }>(
    `SELECT f AS "from", t AS "to", message_status_moves(f, t) AS moves FROM unnest($1::text[]) f CROSS JOIN unnest($1::text[]) t`,
    [states],
  );
  const moves = rows.filter((r) => r.moves).map((r) => `${r.from}>${r.to}`).sort();
  assert.deepEqual(moves, ['delivered>failed', 'delivered>read', 'queued>delivered', 'queued>failed', 'queued>read', 'queued>sent', 'sent>delivered', 'sent>failed', 'sent>read'].sort());
});
