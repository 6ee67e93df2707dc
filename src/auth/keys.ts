import { createHash, randomBytes } from 'node:crypto';
import type { Clock } from '../clock.js';
import type { Db, Tx } from '../db/driver.js';
import { DomainError, invalid, notFound } from '../errors.js';
import { newId } from '../ids.js';
import { iso } from '../util/time.js';
import { KeyCache, type CachedKey } from './key-cache.js';
import { keyRepo, type KeyRow } from './key-repo.js';
import { isScope } from './scopes.js';

export const KEY_PREFIX = 'm2m_live_';

export interface Principal {
  apiKeyId: string;
  /** The key's name, recorded as the actor's display name. */
  apiKeyName: string;
  tenantId: string;
  scopes: string[];
}

export interface ApiKeyView {
  apiKeyId: string;
  name: string;
  keyPrefix: string;
  scopes: string[];
  expiresAt: string | null;
  revokedAt: string | null;
  createdAt: string;
  updatedAt: string;
}

/** Called in the same transaction whenever a key is revoked or its scopes change (webhooks cancel deliveries). */
export type KeyChangeHook = (tx: Tx, change: { tenantId: string; apiKeyId: string; scopes: string[]; revoked: boolean }) => Promise<void>;

export function hashKey(key: string): string {
  return createHash('sha256').update(key).digest('hex');
}

function toView(row: KeyRow): ApiKeyView {
  return {
    apiKeyId: row.id,
    name: row.name,
    keyPrefix: row.key_prefix,
    scopes: row.scopes,
    expiresAt: iso(row.expires_at) ?? null,
    revokedAt: iso(row.revoked_at) ?? null,
    createdAt: iso(row.created_at)!,
    updatedAt: iso(row.updated_at)!,
  };
}

function checkScopes(scopes: string[]): string[] {
  const unknown = scopes.filter((scope) => !isScope(scope));
  if (unknown.length > 0) throw invalid('body.scopes', `unknown scopes: ${unknown.join(', ')}`);
  return [...new Set(scopes)].sort();
}

/** Wakes every node's key cache when a key changes. */
export const API_KEYS_CHANNEL = 'api-keys';

export class ApiKeyService {
  private readonly hooks: KeyChangeHook[] = [];
  private readonly cache: KeyCache;
  private unlisten: (() => void) | undefined;

  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    options: { cacheTtlMs?: number } = {},
  ) {
    this.cache = new KeyCache(options.cacheTtlMs ?? 0);
  }

  /** Starts listening for key changes made by other nodes (required before the cache is used). */
  async start(): Promise<void> {
    if (this.cache.enabled && !this.unlisten) this.unlisten = await this.db.listen(API_KEYS_CHANNEL, () => this.cache.clear());
  }

  stop(): void {
    this.unlisten?.();
    this.unlisten = undefined;
    this.cache.clear();
  }

  onChange(hook: KeyChangeHook): void {
    this.hooks.push(hook);
  }

  /** Resolves a bearer key to its principal; undefined for unknown, revoked or expired keys. */
  async authenticate(key: string): Promise<Principal | undefined> {
    if (!key.startsWith(KEY_PREFIX) || key.length > 200) return undefined;
    const hash = hashKey(key);
    const found = (this.unlisten && this.cache.get(hash)) || (await this.lookup(hash));
    if (!found || found.revoked) return undefined;
    if (found.expiresAt && found.expiresAt.getTime() <= this.clock.now().getTime()) return undefined;
    return { apiKeyId: found.id, apiKeyName: found.name, tenantId: found.tenantId, scopes: found.scopes };
  }

  private async lookup(hash: string): Promise<CachedKey | undefined> {
    const snapshot = this.cache.snapshot();
    const row = await keyRepo.byHash(this.db, hash);
    if (!row) return undefined;
    const found = { id: row.id, name: row.name, tenantId: row.tenant_id, scopes: row.scopes, expiresAt: row.expires_at, revoked: row.revoked_at !== null };
    if (this.unlisten) this.cache.set(hash, found, snapshot);
    return found;
  }

  async create(tenantId: string, input: { name: string; scopes: string[]; expiresAt?: string }): Promise<ApiKeyView & { key: string }> {
    const scopes = checkScopes(input.scopes);
    const now = this.clock.now();
    if (input.expiresAt && new Date(input.expiresAt).getTime() <= now.getTime()) {
      throw invalid('body.expiresAt', 'must be in the future');
    }
    const key = KEY_PREFIX + randomBytes(32).toString('base64url');
    const row = await keyRepo.insert(this.db, {
      id: newId('key'),
      tenantId,
      name: input.name,
      hash: hashKey(key),
      prefix: key.slice(0, KEY_PREFIX.length + 6),
      scopes,
      expiresAt: input.expiresAt ?? null,
      now,
    });
    return { ...toView(row), key };
  }

  async updateScopes(tenantId: string, apiKeyId: string, scopes: string[]): Promise<ApiKeyView> {
    const checked = checkScopes(scopes);
    return this.change(tenantId, apiKeyId, (tx, now) => keyRepo.setScopes(tx, tenantId, apiKeyId, checked, now));
  }

  async revoke(tenantId: string, apiKeyId: string): Promise<ApiKeyView> {
    return this.change(tenantId, apiKeyId, (tx, now) => keyRepo.revoke(tx, tenantId, apiKeyId, now));
  }

  /** One key change and its hooks in one transaction; every node's key cache is dropped at commit. */
  private async change(tenantId: string, apiKeyId: string, write: (tx: Tx, now: Date) => Promise<KeyRow | undefined>): Promise<ApiKeyView> {
    return this.db.transaction(async (tx) => {
      const row = await write(tx, this.clock.now());
      if (!row) throw notFound('api key');
      for (const hook of this.hooks) {
        await hook(tx, { tenantId, apiKeyId, scopes: row.scopes, revoked: row.revoked_at !== null });
      }
      tx.notify(API_KEYS_CHANNEL);
      return toView(row);
    });
  }
}

export function insufficientScope(required: string[], missing: string[]): DomainError {
  return new DomainError('M2M_AUTH_INSUFFICIENT_SCOPE', `the credential lacks the required scope: ${missing.join(', ')}`, {
    requiredScopes: required,
    missingScopes: missing,
  });
}
