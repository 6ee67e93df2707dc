import { randomBytes } from 'node:crypto';
import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Config } from '../config.js';
import { checkKey, type BlobStore } from './blob-key.js';
import { S3BlobStore } from './s3-blob-store.js';

export { checkKey, type BlobStore };

/** Files under `<DATA_DIR>/blobs`, written to a temporary name and renamed, so a reader never sees half a file. */
export class FsBlobStore implements BlobStore {
  readonly kind = 'filesystem' as const;
  constructor(private readonly root: string) {}

  private file(key: string): string {
    return path.join(this.root, ...checkKey(key).split('/'));
  }

  async put(key: string, bytes: Buffer): Promise<void> {
    const file = this.file(key);
    await mkdir(path.dirname(file), { recursive: true });
    const temp = `${file}.${randomBytes(6).toString('hex')}.tmp`;
    await writeFile(temp, bytes);
    await rename(temp, file);
  }

  async get(key: string): Promise<Buffer | undefined> {
    try {
      return await readFile(this.file(key));
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw error;
    }
  }

  async delete(key: string): Promise<void> {
    await rm(this.file(key), { force: true });
  }
}

/** In-process bytes, for `DATA_DIR=memory://` (tests, throwaway runs): gone when the process ends, like the database. */
export class MemoryBlobStore implements BlobStore {
  readonly kind = 'memory' as const;
  private readonly blobs = new Map<string, Buffer>();

  async put(key: string, bytes: Buffer): Promise<void> {
    this.blobs.set(checkKey(key), Buffer.from(bytes));
  }

  async get(key: string): Promise<Buffer | undefined> {
    return this.blobs.get(checkKey(key));
  }

  async delete(key: string): Promise<void> {
    this.blobs.delete(checkKey(key));
  }

  /** Every stored key (tests check that failed writes leave nothing behind). */
  keys(): string[] {
    return [...this.blobs.keys()];
  }
}

/**
 * The store BLOB_STORE chose: an S3 bucket, or the filesystem under DATA_DIR (the in-memory store when
 * DATA_DIR is memory://).
 */
export function createBlobStore(config: Pick<Config, 'dataDir' | 'blobStore'>): BlobStore {
  const { blobStore } = config;
  if (blobStore.kind === 's3') return new S3BlobStore(blobStore);
  if (config.dataDir.startsWith('memory://')) return new MemoryBlobStore();
  return new FsBlobStore(path.resolve(config.dataDir, 'blobs'));
}
