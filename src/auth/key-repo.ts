import type { Queryable } from '../db/driver.js';

export interface KeyRow {
  id: string;
  tenant_id: string;
  name: string;
  key_prefix: string;
  scopes: string[];
  expires_at: Date | null;
  revoked_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

/** What authenticating a bearer key reads. */
export type KeyLookupRow = Pick<KeyRow, 'id' | 'name' | 'tenant_id' | 'scopes' | 'expires_at' | 'revoked_at'>;

export const keyRepo = {
  /** The key with this hash, of any tenant: the hash is what identifies the tenant. */
  async byHash(db: Queryable, hash: string): Promise<KeyLookupRow | undefined> {
    const rows = await db.query<KeyLookupRow>('SELECT id, name, tenant_id, scopes, expires_at, revoked_at FROM api_keys WHERE key_hash = $1', [hash]);
    return rows[0];
  },

  async insert(
    db: Queryable,
    row: { id: string; tenantId: string; name: string; hash: string; prefix: string; scopes: string[]; expiresAt: string | null; now: Date },
  ): Promise<KeyRow> {
    const rows = await db.query<KeyRow>(
      `INSERT INTO api_keys (id, tenant_id, name, key_hash, key_prefix, scopes, expires_at, created_at, updated_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8) RETURNING *`,
      [row.id, row.tenantId, row.name, row.hash, row.prefix, row.scopes, row.expiresAt, row.now],
    );
    return rows[0];
  },

  async setScopes(db: Queryable, tenantId: string, id: string, scopes: string[], now: Date): Promise<KeyRow | undefined> {
    const rows = await db.query<KeyRow>('UPDATE api_keys SET scopes = $3, updated_at = $4 WHERE id = $1 AND tenant_id = $2 RETURNING *', [id, tenantId, scopes, now]);
    return rows[0];
  },

  /** Revokes the key (a revoked key keeps its first revocation time). */
  async revoke(db: Queryable, tenantId: string, id: string, now: Date): Promise<KeyRow | undefined> {
    const rows = await db.query<KeyRow>(
      'UPDATE api_keys SET revoked_at = COALESCE(revoked_at, $3), updated_at = $3 WHERE id = $1 AND tenant_id = $2 RETURNING *',
      [id, tenantId, now],
    );
    return rows[0];
  },
};
