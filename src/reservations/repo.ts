import type { Queryable, Tx } from '../db/driver.js';

export interface IntegrationRow {
  id: string;
  tenant_id: string;
  provider: string;
  name: string;
  created_at: Date;
}

/** A mirror joined with its integration and property names; dates are `YYYY-MM-DD` strings. */
export interface MirrorRow {
  id: string;
  tenant_id: string;
  integration_id: string;
  provider: string;
  integration_name: string;
  provider_reservation_id: string;
  status: string;
  property_id: string | null;
  property_name: string | null;
  check_in_date: string;
  check_out_date: string;
  booked_at: Date;
  guest_full_name: string;
  guest_email: string | null;
  guest_phone_raw: string | null;
  guest_phone_e164: string | null;
  source_updated_at: Date | null;
  source_freshness_at: Date;
  last_synced_at: Date;
  pre_checkin_for: string | null;
  pre_checkin_state: 'deferred' | 'done' | null;
  created_at: Date;
  updated_at: Date;
}

/** What a provider sync writes. */
export interface MirrorFields {
  status: string;
  propertyId: string | null;
  checkInDate: string;
  checkOutDate: string;
  bookedAt: Date;
  guestFullName: string;
  guestEmail: string | null;
  guestPhoneRaw: string | null;
  guestPhoneE164: string | null;
  sourceUpdatedAt: Date | null;
}

export type SortColumn = 'check_in_date' | 'booked_at';

export interface MirrorFilter {
  tenantId: string;
  integrationId?: string;
  providerReservationId?: string;
  status?: string;
}

export interface MirrorPage {
  sortBy: SortColumn;
  sortDir: 'asc' | 'desc';
  limit: number;
  /** Keyset position: the sort value (date or ISO instant) and id of the last row of the previous page. */
  after?: { v: string; id: string };
}

const mirrorSelect = `SELECT m.id, m.tenant_id, m.integration_id, i.provider, i.name AS integration_name, m.provider_reservation_id, m.status,
    m.property_id, p.name AS property_name, to_char(m.check_in_date, 'YYYY-MM-DD') AS check_in_date,
    to_char(m.check_out_date, 'YYYY-MM-DD') AS check_out_date, m.booked_at, m.guest_full_name, m.guest_email, m.guest_phone_raw,
    m.guest_phone_e164, m.source_updated_at, m.source_freshness_at, m.last_synced_at,
    to_char(m.pre_checkin_for, 'YYYY-MM-DD') AS pre_checkin_for, m.pre_checkin_state, m.created_at, m.updated_at
  FROM reservation_mirrors m JOIN integrations i ON i.id = m.integration_id LEFT JOIN properties p ON p.id = m.property_id`;

// Whitelisted SQL fragments for the two sorts: never built from request text.
const sortSql: Record<SortColumn, { column: string; cast: string }> = {
  check_in_date: { column: 'm.check_in_date', cast: 'date' },
  booked_at: { column: 'm.booked_at', cast: 'timestamptz' },
};

function mirrorValues(fields: MirrorFields): unknown[] {
  return [
    fields.status,
    fields.propertyId,
    fields.checkInDate,
    fields.checkOutDate,
    fields.bookedAt,
    fields.guestFullName,
    fields.guestEmail,
    fields.guestPhoneRaw,
    fields.guestPhoneE164,
    fields.sourceUpdatedAt,
  ];
}

export const integrationRepo = {
  async insert(db: Queryable, row: { id: string; tenantId: string; provider: string; name: string; now: Date }): Promise<IntegrationRow> {
    const rows = await db.query<IntegrationRow>(
      `INSERT INTO integrations (id, tenant_id, provider, name, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $5)
       RETURNING id, tenant_id, provider, name, created_at`,
      [row.id, row.tenantId, row.provider, row.name, row.now],
    );
    return rows[0];
  },

  async get(db: Queryable, tenantId: string, integrationId: string): Promise<IntegrationRow | undefined> {
    const rows = await db.query<IntegrationRow>('SELECT id, tenant_id, provider, name, created_at FROM integrations WHERE tenant_id = $1 AND id = $2', [
      tenantId,
      integrationId,
    ]);
    return rows[0];
  },

  async list(db: Queryable, tenantId: string): Promise<IntegrationRow[]> {
    return db.query<IntegrationRow>('SELECT id, tenant_id, provider, name, created_at FROM integrations WHERE tenant_id = $1 ORDER BY created_at, id', [tenantId]);
  },
};

export const mirrorRepo = {
  /** The mirror of a provider reservation, locked for the rest of the transaction. */
  async lockByProviderId(tx: Tx, tenantId: string, integrationId: string, providerReservationId: string): Promise<MirrorRow | undefined> {
    const rows = await tx.query<MirrorRow>(
      `${mirrorSelect} WHERE m.tenant_id = $1 AND m.integration_id = $2 AND m.provider_reservation_id = $3 FOR UPDATE OF m`,
      [tenantId, integrationId, providerReservationId],
    );
    return rows[0];
  },

  async get(db: Queryable, tenantId: string, id: string, lock = false): Promise<MirrorRow | undefined> {
    const rows = await db.query<MirrorRow>(`${mirrorSelect} WHERE m.tenant_id = $1 AND m.id = $2${lock ? ' FOR UPDATE OF m' : ''}`, [tenantId, id]);
    return rows[0];
  },

  /** Inserts a new mirror; returns false when a concurrent sync inserted it first. */
  async insert(tx: Tx, row: { id: string; tenantId: string; integrationId: string; providerReservationId: string; fields: MirrorFields; now: Date }): Promise<boolean> {
    const rows = await tx.query(
      `INSERT INTO reservation_mirrors (id, tenant_id, integration_id, provider_reservation_id, status, property_id, check_in_date, check_out_date,
         booked_at, guest_full_name, guest_email, guest_phone_raw, guest_phone_e164, source_updated_at, source_freshness_at, last_synced_at,
         created_at, updated_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7::date, $8::date, $9::timestamptz, $10, $11, $12, $13, $14::timestamptz, COALESCE($14::timestamptz, $15::timestamptz), $15, $15, $15)
       ON CONFLICT (tenant_id, integration_id, provider_reservation_id) DO NOTHING RETURNING id`,
      [row.id, row.tenantId, row.integrationId, row.providerReservationId, ...mirrorValues(row.fields), row.now],
    );
    return rows.length > 0;
  },

  /** Records an accepted sync: new content when `changed`, and always lastSyncedAt and freshness. */
  async update(tx: Tx, tenantId: string, id: string, fields: MirrorFields, changed: boolean, now: Date): Promise<void> {
    await tx.query(
      `UPDATE reservation_mirrors SET status = $3, property_id = $4, check_in_date = $5::date, check_out_date = $6::date, booked_at = $7::timestamptz,
         guest_full_name = $8, guest_email = $9, guest_phone_raw = $10, guest_phone_e164 = $11,
         source_updated_at = COALESCE($12::timestamptz, source_updated_at), source_freshness_at = COALESCE($12::timestamptz, $13::timestamptz),
         last_synced_at = $13::timestamptz, updated_at = CASE WHEN $14::boolean THEN $13::timestamptz ELSE updated_at END
       WHERE tenant_id = $1 AND id = $2`,
      [tenantId, id, ...mirrorValues(fields), now, changed],
    );
  },

  async list(db: Queryable, filter: MirrorFilter, page: MirrorPage): Promise<MirrorRow[]> {
    const params: unknown[] = [filter.tenantId];
    const where = ['m.tenant_id = $1'];
    const add = (sql: string, value: unknown) => {
      params.push(value);
      where.push(sql.replace('?', `$${params.length}`));
    };
    if (filter.integrationId) add('m.integration_id = ?', filter.integrationId);
    if (filter.providerReservationId) add('m.provider_reservation_id = ?', filter.providerReservationId);
    if (filter.status) add('m.status = ?', filter.status);
    const { column, cast } = sortSql[page.sortBy];
    const dir = page.sortDir === 'desc' ? 'DESC' : 'ASC';
    if (page.after) {
      params.push(page.after.v, page.after.id);
      where.push(`(${column}, m.id) ${dir === 'DESC' ? '<' : '>'} ($${params.length - 1}::${cast}, $${params.length})`);
    }
    params.push(page.limit);
    return db.query<MirrorRow>(`${mirrorSelect} WHERE ${where.join(' AND ')} ORDER BY ${column} ${dir}, m.id ${dir} LIMIT $${params.length}`, params);
  },

  async statuses(db: Queryable, tenantId: string): Promise<string[]> {
    const rows = await db.query<{ status: string }>('SELECT DISTINCT status FROM reservation_mirrors WHERE tenant_id = $1 ORDER BY status', [tenantId]);
    return rows.map((row) => row.status);
  },

  /** Mirrors whose normalised guest phone is `phone`, latest check-in first, and how many there are in all. */
  async byGuestPhone(db: Queryable, tenantId: string, phone: string, limit: number): Promise<{ rows: MirrorRow[]; total: number }> {
    const rows = await db.query<MirrorRow>(
      `${mirrorSelect} WHERE m.tenant_id = $1 AND m.guest_phone_e164 = $2 ORDER BY m.check_in_date DESC, m.id DESC LIMIT $3`,
      [tenantId, phone, limit],
    );
    const count = await db.query<{ total: number }>('SELECT count(*)::int AS total FROM reservation_mirrors WHERE tenant_id = $1 AND guest_phone_e164 = $2', [
      tenantId,
      phone,
    ]);
    return { rows, total: count[0]?.total ?? 0 };
  },

  /**
   * Confirmed mirrors the pre_checkin schedule should look at, in id order after `afterId`: those not yet
   * seen for their current check-in date, and deferred ones whose check-in is now close. Dates are a
   * slightly wide UTC window; the caller applies each tenant's own "today".
   */
  async preCheckinCandidates(db: Queryable, window: { from: string; dueUntil: string; afterId: string; limit: number }): Promise<Array<{ id: string; tenant_id: string }>> {
    return db.query<{ id: string; tenant_id: string }>(
      `SELECT id, tenant_id FROM reservation_mirrors
       WHERE status = 'confirmed' AND check_in_date >= $1::date AND id > $3
         AND (pre_checkin_for IS DISTINCT FROM check_in_date OR (pre_checkin_state = 'deferred' AND check_in_date <= $2::date))
       ORDER BY id LIMIT $4`,
      [window.from, window.dueUntil, window.afterId, window.limit],
    );
  },

  async setPreCheckin(tx: Tx, tenantId: string, id: string, forDate: string, state: 'deferred' | 'done'): Promise<void> {
    await tx.query('UPDATE reservation_mirrors SET pre_checkin_for = $3::date, pre_checkin_state = $4 WHERE tenant_id = $1 AND id = $2', [tenantId, id, forDate, state]);
  },
};
