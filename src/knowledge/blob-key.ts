/**
 * Where uploaded bytes (assets and file sources) live; the database keeps only the key. Keys are
 * `<tenantId>/<sourceId>`: written once, never changed, deleted with their source.
 */
export interface BlobStore {
  readonly kind: 'filesystem' | 'memory' | 's3';
  put(key: string, bytes: Buffer): Promise<void>;
  /** The bytes, or undefined when nothing is stored under the key. */
  get(key: string): Promise<Buffer | undefined>;
  delete(key: string): Promise<void>;
  /** Releases connections (stores that hold any). */
  close?(): Promise<void>;
}

const KEY = /^[A-Za-z0-9_-]{1,128}(\/[A-Za-z0-9_-]{1,128}){0,3}$/;

/** Every store refuses keys outside `segment(/segment){0,3}` of `[A-Za-z0-9_-]`: no dots, so no `..`, no odd bytes. */
export function checkKey(key: string): string {
  if (!KEY.test(key)) throw new Error(`invalid blob key "${key}"`);
  return key;
}
