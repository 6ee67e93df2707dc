import type { Db } from '../db/driver.js';

/**
 * Channels of the release before providers per channel (decisions 7.1): one global CHANNEL_PROVIDER decided for
 * every channel. Migration 0033 made every channel `sandbox` and marked the WhatsApp ones that named a phone-number
 * id. At start, a deployment that still sets CHANNEL_PROVIDER=whatsapp gets them as `whatsapp_cloud` channels (the
 * token: META_SYSTEM_USER_TOKEN or its fallback WHATSAPP_ACCESS_TOKEN; the WABA id is set later with PATCH), so it
 * keeps sending as before; any other start leaves them sandbox. Either way the mark is cleared: it happens once.
 * A phone-number id already used by a whatsapp_cloud channel stays with that channel.
 */
export async function adoptLegacyChannels(db: Db, legacyProvider: string | undefined): Promise<number> {
  return db.transaction(async (tx) => {
    let adopted = 0;
    if (legacyProvider === 'whatsapp') {
      const rows = await tx.query<{ id: string }>(
        `UPDATE channels c SET provider = 'whatsapp_cloud', connection = jsonb_build_object('phoneNumberId', c.provider_ref, 'wabaId', ''), legacy_sender = false
         WHERE c.legacy_sender AND c.provider = 'sandbox'
           AND c.id = (SELECT first.id FROM channels first WHERE first.legacy_sender AND first.provider_ref = c.provider_ref ORDER BY first.created_at, first.id LIMIT 1)
           AND NOT EXISTS (SELECT 1 FROM channels o WHERE o.provider = 'whatsapp_cloud' AND o.provider_ref = c.provider_ref)
         RETURNING c.id`,
      );
      adopted = rows.length;
    }
    await tx.query('UPDATE channels SET legacy_sender = false WHERE legacy_sender');
    return adopted;
  });
}
