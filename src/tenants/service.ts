import type { Clock } from '../clock.js';
import type { Ctx } from '../context.js';
import type { Db } from '../db/driver.js';
import { invalid, notFound } from '../errors.js';
import { newId, newOperatorId } from '../ids.js';
import { iso } from '../util/time.js';
import { operatorRepo, propertyRepo, tenantRepo, type OperatorRow, type TenantRow } from './repo.js';

export function isTimeZone(zone: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: zone });
    return true;
  } catch {
    return false;
  }
}

function settingsView(row: TenantRow) {
  return { timezone: row.timezone, salesAvailable: row.sales_available, salesPublished: row.sales_published };
}

export function operatorView(row: OperatorRow) {
  return { operatorId: row.id, displayName: row.display_name, email: row.email, active: row.active };
}

/** Tenants and what belongs to them directly: settings, operators, properties. */
export class TenantService {
  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
  ) {}

  async create(input: { name: string; timezone?: string }) {
    const timezone = input.timezone ?? 'UTC';
    if (!isTimeZone(timezone)) throw invalid('body.timezone', 'must be an IANA time zone such as Europe/Madrid');
    const row = await tenantRepo.insert(this.db, { id: newId('ten'), name: input.name, timezone, now: this.clock.now() });
    return { tenantId: row.id, name: row.name, timezone: row.timezone };
  }

  /** Throws 404 unless the tenant exists (every admin route under a tenant calls this first). */
  async require(tenantId: string): Promise<TenantRow> {
    const row = await tenantRepo.get(this.db, tenantId);
    if (!row) throw notFound('tenant');
    return row;
  }

  async settings(tenantId: string) {
    return settingsView(await this.require(tenantId));
  }

  async updateSettings(tenantId: string, patch: { timezone?: string; salesAvailable?: boolean; salesPublished?: boolean }) {
    if (patch.timezone !== undefined && !isTimeZone(patch.timezone)) {
      throw invalid('body.timezone', 'must be an IANA time zone such as Europe/Madrid');
    }
    const row = await tenantRepo.updateSettings(this.db, tenantId, patch, this.clock.now());
    if (!row) throw notFound('tenant');
    return settingsView(row);
  }

  async createOperator(tenantId: string, input: { displayName: string; email: string }) {
    await this.require(tenantId);
    const row = await operatorRepo.insert(this.db, { id: newOperatorId(), tenantId, ...input, now: this.clock.now() });
    return operatorView(row);
  }

  async setOperatorActive(tenantId: string, operatorId: string, active: boolean) {
    const row = await operatorRepo.setActive(this.db, tenantId, operatorId, active, this.clock.now());
    if (!row) throw notFound('operator');
    return operatorView(row);
  }

  async createProperty(tenantId: string, input: { name: string }) {
    await this.require(tenantId);
    const row = await propertyRepo.insert(this.db, { id: newId('prop'), tenantId, name: input.name, now: this.clock.now() });
    return { propertyId: row.id, name: row.name, createdAt: iso(row.created_at)! };
  }

  async listProperties({ tenantId }: Ctx) {
    const rows = await propertyRepo.list(this.db, tenantId);
    return { properties: rows.map((row) => ({ propertyId: row.id, name: row.name, createdAt: iso(row.created_at)! })) };
  }
}
