import { Type } from 'typebox';
import { defineAdminOperation, WithStatus } from '../admin/define.js';
import { Strict } from '../http/schemas.js';
import { IntegrationBody, Mirror, SyncBody } from './schema.js';

const Id = Type.String({ minLength: 1, maxLength: 200 });
const Integration = Type.Object({ integrationId: Type.String(), provider: Type.String(), name: Type.String() }, { additionalProperties: false });

/** Property-management integrations and the provider sync that pushes reservation mirrors. */
export const reservationAdminOperations = [
  defineAdminOperation({
    operationId: 'createIntegration',
    method: 'POST',
    path: '/tenants/{tenantId}/integrations',
    summary: 'Create a property-management integration',
    params: Type.Object({ tenantId: Id }, Strict),
    body: IntegrationBody,
    status: 201,
    response: Integration,
    errors: [404],
    handler: (services, ctx, input) => services.reservations.createIntegration(ctx.tenantId, input),
  }),
  defineAdminOperation({
    operationId: 'syncReservation',
    method: 'PUT',
    path: '/tenants/{tenantId}/integrations/{integrationId}/reservations/{providerReservationId}',
    summary: 'Push a reservation mirror (a full replacement; 201 when it is created, 200 after)',
    params: Type.Object({ tenantId: Id, integrationId: Id, providerReservationId: Type.String({ minLength: 1, maxLength: 500 }) }, Strict),
    body: SyncBody,
    status: 200,
    alsoStatus: [201],
    response: Mirror,
    errors: [404],
    handler: async (services, ctx, { integrationId, providerReservationId, ...input }) => {
      const { created, mirror } = await services.reservations.sync(ctx.tenantId, integrationId, providerReservationId, input);
      return created ? new WithStatus(201, mirror) : mirror;
    },
  }),
];
