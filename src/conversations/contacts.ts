import type { Static } from 'typebox';
import type { Clock } from '../clock.js';
import type { Ctx } from '../context.js';
import type { Db } from '../db/driver.js';
import { conflict, invalid, notFound } from '../errors.js';
import { newId } from '../ids.js';
import { iso } from '../util/time.js';
import type { PatchContactBody, UpsertContactBody } from './contact-schema.js';
import { normalizePhone } from './phone.js';
import { conversationRepo, type ContactRow } from './repo.js';

/** A contact as an integrator reads it: consent with its source and time, opt-out with its time. */
export function publicContactView(row: ContactRow) {
  return {
    contactId: row.id,
    name: row.name ?? undefined,
    phone: row.phone_e164 ?? undefined,
    handle: row.handle ?? undefined,
    consent: { granted: row.consent, source: row.consent_source ?? undefined, grantedAt: iso(row.consent_granted_at) },
    optedOut: row.opted_out,
    optedOutAt: iso(row.opted_out_at),
    createdAt: iso(row.created_at)!,
    updatedAt: iso(row.updated_at)!,
  };
}

type ContactPatch = Parameters<typeof conversationRepo.updateContact>[3];

function patchOf(input: { name?: string; consent?: { granted: boolean; source: string }; optedOut?: boolean }): ContactPatch {
  return {
    ...(input.name !== undefined ? { name: input.name } : {}),
    ...(input.consent ? { consent: input.consent.granted, consentSource: input.consent.source } : {}),
    ...(input.optedOut !== undefined ? { optedOut: input.optedOut } : {}),
  };
}

/**
 * Contacts for integrators: how a business records the opt-in it collected before a conversation start. The
 * consent stored here is the one conversation starts, follow-up automation and the lifecycle check.
 */
export class ContactService {
  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
  ) {}

  async get({ tenantId }: Ctx, { contactId }: { contactId: string }) {
    const row = await conversationRepo.getContact(this.db, tenantId, contactId);
    if (!row) throw notFound('contact');
    return { contact: publicContactView(row) };
  }

  /** Finds the contact by its E.164 phone or creates it, then applies name and consent. `created` tells which. */
  async upsert({ tenantId }: Ctx, input: Static<typeof UpsertContactBody>) {
    const phone = normalizePhone(input.phone);
    if (!phone) throw invalid('body.phone', 'must be a valid international phone number such as +525512345678');
    return this.db.transaction(async (tx) => {
      const now = this.clock.now();
      let created = false;
      let row = await conversationRepo.findContactByPhone(tx, tenantId, phone);
      if (!row) {
        row = await conversationRepo.insertContact(tx, { id: newId('ct'), tenant_id: tenantId, name: input.name ?? null, phone_e164: phone, handle: null, now });
        created = row !== undefined;
        // Created by a concurrent request between the lookup and the insert: it exists.
        row ??= await conversationRepo.findContactByPhone(tx, tenantId, phone);
        if (!row) throw conflict('contact was created concurrently; retry');
      }
      const patch = patchOf({ name: input.name !== undefined && input.name !== row.name ? input.name : undefined, consent: input.consent });
      if (Object.keys(patch).length > 0) row = (await conversationRepo.updateContact(tx, tenantId, row.id, patch, now)) ?? row;
      return { created, contact: publicContactView(row) };
    });
  }

  async update({ tenantId }: Ctx, { contactId, ...input }: { contactId: string } & Static<typeof PatchContactBody>) {
    return this.db.transaction(async (tx) => {
      const row = await conversationRepo.updateContact(tx, tenantId, contactId, patchOf(input), this.clock.now());
      if (!row) throw notFound('contact');
      return { contact: publicContactView(row) };
    });
  }
}
