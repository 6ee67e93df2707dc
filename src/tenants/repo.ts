import type { Queryable } from '../db/driver.js';

export interface TenantRow {
  id: string;
  name: string;
  timezone: string;
  sales_available: boolean;
  sales_published: boolean;
  created_at: Date;
  updated_at: Date;
}

export interface OperatorRow {
  id: string;
  tenant_id: string;
  display_name: string;
  email: string;
  active: boolean;
  created_at: Date;
  updated_at: Date;
}

export interface PropertyRow {
  id: string;
  tenant_id: string;
  name: string;
  created_at: Date;
}

export const tenantRepo = {
  async insert(db: Queryable, row: { id: string; name: string; timezone: string; now: Date }): Promise<TenantRow> {
    const rows = await db.query<TenantRow>(
      'INSERT INTO tenants (id, name, timezone, created_at, updated_at) VALUES ($1, $2, $3, $4, $4) RETURNING *',
      [row.id, row.name, row.timezone, row.now],
    );
    return rows[0];
  },

  async get(db: Queryable, tenantId: string): Promise<TenantRow | undefined> {
    return (await db.query<TenantRow>('SELECT * FROM tenants WHERE id = $1', [tenantId]))[0];
  },

  async updateSettings(
    db: Queryable,
    tenantId: string,
    patch: { timezone?: string; salesAvailable?: boolean; salesPublished?: boolean },
    now: Date,
  ): Promise<TenantRow | undefined> {
    const rows = await db.query<TenantRow>(
      `UPDATE tenants SET timezone = COALESCE($2, timezone), sales_available = COALESCE($3, sales_available),
         sales_published = COALESCE($4, sales_published), updated_at = $5
       WHERE id = $1 RETURNING *`,
      [tenantId, patch.timezone ?? null, patch.salesAvailable ?? null, patch.salesPublished ?? null, now],
    );
    return rows[0];
  },
};

export const operatorRepo = {
  async insert(db: Queryable, row: { id: string; tenantId: string; displayName: string; email: string; now: Date }): Promise<OperatorRow> {
    const rows = await db.query<OperatorRow>(
      `INSERT INTO operators (id, tenant_id, display_name, email, active, created_at, updated_at)
       VALUES ($1, $2, $3, $4, true, $5, $5) RETURNING *`,
      [row.id, row.tenantId, row.displayName, row.email, row.now],
    );
    return rows[0];
  },

  async setActive(db: Queryable, tenantId: string, operatorId: string, active: boolean, now: Date): Promise<OperatorRow | undefined> {
    const rows = await db.query<OperatorRow>(
      'UPDATE operators SET active = $3, updated_at = $4 WHERE id = $1 AND tenant_id = $2 RETURNING *',
      [operatorId, tenantId, active, now],
    );
    return rows[0];
  },

  async get(db: Queryable, tenantId: string, operatorId: string): Promise<OperatorRow | undefined> {
    return (await db.query<OperatorRow>('SELECT * FROM operators WHERE id = $1 AND tenant_id = $2', [operatorId, tenantId]))[0];
  },

  /** The tenant's active operators, by name: whom a conversation can be assigned to. */
  async listActive(db: Queryable, tenantId: string): Promise<Array<Pick<OperatorRow, 'id' | 'display_name' | 'email'>>> {
    return db.query('SELECT id, display_name, email FROM operators WHERE tenant_id = $1 AND active ORDER BY display_name, id', [tenantId]);
  },
};

export const propertyRepo = {
  async insert(db: Queryable, row: { id: string; tenantId: string; name: string; now: Date }): Promise<PropertyRow> {
    const rows = await db.query<PropertyRow>(
      'INSERT INTO properties (id, tenant_id, name, created_at) VALUES ($1, $2, $3, $4) RETURNING *',
      [row.id, row.tenantId, row.name, row.now],
    );
    return rows[0];
  },

  async get(db: Queryable, tenantId: string, propertyId: string): Promise<PropertyRow | undefined> {
    return (await db.query<PropertyRow>('SELECT * FROM properties WHERE id = $1 AND tenant_id = $2', [propertyId, tenantId]))[0];
  },

  /** The tenant's properties, oldest first (a business has a handful). */
  async list(db: Queryable, tenantId: string): Promise<PropertyRow[]> {
    return db.query<PropertyRow>('SELECT * FROM properties WHERE tenant_id = $1 ORDER BY created_at, id', [tenantId]);
  },
};
