import { Type } from 'typebox';
import { DateTime, Ref, Strict } from '../http/schemas.js';

export const ContactParams = Type.Object({ contactId: Type.String({ minLength: 1, maxLength: 200 }) }, Strict);

/** Consent as the business recorded it: granted or withdrawn, and where it collected the decision. */
const ConsentInput = Type.Object(
  {
    granted: Type.Boolean(),
    source: Type.String({ minLength: 1, maxLength: 200, description: 'Where the business collected the decision: booking form, front desk, …' }),
  },
  Strict,
);

const ContactName = Type.String({ minLength: 1, maxLength: 160 });

export const PublicContact = Type.Object(
  {
    contactId: Type.String(),
    name: Type.Optional(Type.String()),
    phone: Type.Optional(Type.String({ description: 'E.164' })),
    handle: Type.Optional(Type.String()),
    consent: Type.Object(
      { granted: Type.Boolean(), source: Type.Optional(Type.String()), grantedAt: Type.Optional(DateTime) },
      { additionalProperties: false },
    ),
    optedOut: Type.Boolean(),
    optedOutAt: Type.Optional(DateTime),
    createdAt: DateTime,
    updatedAt: DateTime,
  },
  { $id: 'Contact', additionalProperties: false },
);

export const ContactEnvelope = Type.Object({ contact: Ref(PublicContact) }, { additionalProperties: false });

export const UpsertContactBody = Type.Object(
  {
    phone: Type.String({ minLength: 1, maxLength: 64, description: 'International number; stored in E.164 form' }),
    name: Type.Optional(ContactName),
    consent: Type.Optional(ConsentInput),
  },
  Strict,
);

export const PatchContactBody = Type.Object(
  { name: Type.Optional(ContactName), consent: Type.Optional(ConsentInput), optedOut: Type.Optional(Type.Boolean()) },
  { ...Strict, minProperties: 1 },
);

export const contactSharedSchemas = [PublicContact];
