import { WithStatus, defineOperation } from '../operations/define.js';
import { ContactEnvelope, ContactParams, PatchContactBody, UpsertContactBody } from './contact-schema.js';
import type { ContactService } from './contacts.js';

/** What the contact operations call. */
export interface ContactOperationServices {
  contacts: ContactService;
}

const common = { area: 'contacts', tag: 'Contacts', extension: true } as const;
const at = '2026-11-24T10:00:00.000Z';
const contact = {
  contactId: 'ct_9o8i7u6y5t4r3e2w1q0p',
  name: 'Ana Martínez',
  phone: '+525512345678',
  consent: { granted: true, source: 'booking form', grantedAt: at },
  optedOut: false,
  createdAt: at,
  updatedAt: at,
};

export const contactOperations = [
  defineOperation({
    ...common,
    operationId: 'getContact',
    sdk: 'contacts.get',
    method: 'GET',
    path: '/contacts/{contactId}',
    summary: 'Read a contact',
    description: 'One contact (a guest) with the consent the business recorded and whether the guest opted out.',
    scopes: ['contacts:read'],
    params: ContactParams,
    status: 200,
    response: ContactEnvelope,
    errors: [404],
    examples: { response: { contact } },
    handler: (s: ContactOperationServices, ctx, input) => s.contacts.get(ctx, input),
  }),
  defineOperation({
    ...common,
    operationId: 'upsertContact',
    sdk: 'contacts.upsert',
    method: 'POST',
    path: '/contacts',
    summary: 'Create or find a contact by phone, recording consent',
    description:
      'Finds the contact with this phone number (E.164) or creates it: 201 when created, 200 when it existed. Records the name and the consent the business collected (booking form, front desk) with its source; a conversation start needs that consent. Safe to repeat.',
    scopes: ['contacts:write'],
    body: UpsertContactBody,
    status: 201,
    alsoStatus: [200],
    response: ContactEnvelope,
    hints: { idempotent: true },
    examples: { request: { phone: '+52 55 1234 5678', name: 'Ana Martínez', consent: { granted: true, source: 'booking form' } }, response: { contact } },
    handler: async (s: ContactOperationServices, ctx, input) => {
      const { created, contact: found } = await s.contacts.upsert(ctx, input);
      return new WithStatus(created ? 201 : 200, { contact: found });
    },
  }),
  defineOperation({
    ...common,
    operationId: 'updateContact',
    sdk: 'contacts.update',
    method: 'PATCH',
    path: '/contacts/{contactId}',
    summary: "Change a contact's name, consent or opt-out",
    description: 'Changes the name, records consent given or withdrawn (with its source), or records an opt-out; only the fields sent change. An opted-out contact is never messaged.',
    scopes: ['contacts:write'],
    params: ContactParams,
    body: PatchContactBody,
    status: 200,
    response: ContactEnvelope,
    errors: [404],
    hints: { idempotent: true },
    examples: { request: { optedOut: true }, response: { contact: { ...contact, optedOut: true, optedOutAt: at } } },
    handler: (s: ContactOperationServices, ctx, input) => s.contacts.update(ctx, input),
  }),
];
