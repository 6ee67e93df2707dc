/**
 * Known API keys resolved recently, by key hash, so an authenticated request does not pay a database round
 * trip for its key. Entries live `ttlMs` at most; any key change on any node clears the whole cache at once
 * (NOTIFY on the `api-keys` channel, see ApiKeyService), so a revocation or scope change takes effect within
 * the notification's delivery, and within `ttlMs` even if a notification were lost. Unknown keys are never
 * cached, so guessing keys cannot fill memory, and a new key works at once.
 */
export interface CachedKey {
  id: string;
  name: string;
  tenantId: string;
  scopes: string[];
  expiresAt: Date | null;
  revoked: boolean;
}

export class KeyCache {
  private readonly entries = new Map<string, { key: CachedKey; storedAt: number }>();
  /** Bumped on every clear: a lookup that started before a clear must not store what it read. */
  private generation = 0;

  constructor(
    private readonly ttlMs: number,
    private readonly maxEntries = 10_000,
    private readonly now: () => number = () => performance.now(),
  ) {}

  get enabled(): boolean {
    return this.ttlMs > 0;
  }

  get(hash: string): CachedKey | undefined {
    const entry = this.entries.get(hash);
    if (!entry) return undefined;
    if (this.now() - entry.storedAt >= this.ttlMs) {
      this.entries.delete(hash);
      return undefined;
    }
    return entry.key;
  }

  /** A token to pass to `set`, taken before the database read. */
  snapshot(): number {
    return this.generation;
  }

  set(hash: string, key: CachedKey, snapshot: number): void {
    if (!this.enabled || snapshot !== this.generation) return;
    if (this.entries.size >= this.maxEntries) {
      const oldest = this.entries.keys().next();
      if (!oldest.done) this.entries.delete(oldest.value);
    }
    this.entries.set(hash, { key, storedAt: this.now() });
  }

  clear(): void {
    this.generation += 1;
    this.entries.clear();
  }
}
