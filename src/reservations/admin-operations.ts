import { Type } from 'typebox';
import { defineOperation, WithStatus } from '../operations/define.js';
import { Strict } from '../http/schemas.js';
import { IntegrationBody, Mirror, SyncBody } from './schema.js';
import type { ReservationService } from './service.js';

/** What the reservation admin operations call. */
export interface ReservationAdminServices {
  reservations: ReservationService;
}

const Id = Type.String({ minLength: 1, maxLength: 200 });
const Integration = Type.Object({ integrationId: Type.String(), provider: Type.String(), name: Type.String() }, { additionalProperties: false });

/** Property-management integrations and the provider sync that pushes reservation mirrors. */
export const reservationAdminOperations = [
  defineOperation({
    surface: 'admin',
    operationId: 'createIntegration',
    method: 'POST',
    path: '/tenants/{tenantId}/integrations',
    summary: 'Create a property-management integration',
    params: Type.Object({ tenantId: Id }, Strict),
    body: IntegrationBody,
    status: 201,
    response: Integration,
    errors: [404],
    handler: (services: ReservationAdminServices, ctx, input) => services.reservations.createIntegration(ctx.tenantId, input),
  }),
  defineOperation({
    surface: 'admin',
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
    handler: async (services: ReservationAdminServices, ctx, { integrationId, providerReservationId, ...input }) => {
      const { created, mirror } = await services.reservations.sync(ctx.tenantId, integrationId, providerReservationId, input);
      return created ? new WithStatus(201, mirror) : mirror;
    },
  }),
];
