/**
 * The tenants a search lately found to have more than VECTOR_SCAN_LIMIT chunks, so that the next searches of the
 * same tenant skip counting them: the count walks VECTOR_SCAN_LIMIT + 1 index entries, as much work as a plain
 * full-text query. Only large tenants are remembered (a small tenant's count is as short as its knowledge), and
 * each for `ttlMs` from when it was counted: a tenant that shrinks below the limit is counted again within that time.
 */
export class LargeTenants {
  private readonly countedAt = new Map<string, number>();

  constructor(private readonly ttlMs = 60_000) {}

  /** Whether a count less than ttlMs before `now` (ms) found the tenant large. */
  has(tenantId: string, now: number): boolean {
    const at = this.countedAt.get(tenantId);
    if (at === undefined) return false;
    if (now - at < this.ttlMs) return true;
    this.countedAt.delete(tenantId);
    return false;
  }

  /** What a search that counted the tenant's chunks found. */
  record(tenantId: string, large: boolean, now: number): void {
    if (!large) {
      this.countedAt.delete(tenantId);
      return;
    }
    if (this.countedAt.size >= 10_000) {
      for (const [id, at] of this.countedAt) if (now - at >= this.ttlMs) this.countedAt.delete(id);
    }
    this.countedAt.set(tenantId, now);
  }
}
