import { createCipheriv, createDecipheriv, createHmac, hkdfSync, randomBytes } from 'node:crypto';
import type { Db } from './db/driver.js';
import { appSecretRepo } from './secrets-repo.js';

/** Keys derived from SECRET_KEY (or from the generated key kept in the database). */
export interface Keyring {
  /** HMAC key for cursors and share links. */
  signingKey: Buffer;
  /** AES-256-GCM key for secrets stored at rest (webhook secrets). */
  encryptionKey: Buffer;
  /** True when the master key came from SECRET_KEY rather than the database. */
  fromConfig: boolean;
}

function derive(master: Buffer, purpose: string): Buffer {
  return Buffer.from(hkdfSync('sha256', master, Buffer.alloc(0), `m2m:${purpose}`, 32));
}

/**
 * Uses SECRET_KEY when set; otherwise generates one on first start and keeps it in the database,
 * so every node and every restart agree.
 */
export async function loadKeyring(db: Db, configured: Buffer | undefined): Promise<Keyring> {
  let master = configured;
  if (!master) {
    master = Buffer.from(await appSecretRepo.getOrCreate(db, 'master_key', randomBytes(32).toString('base64')), 'base64');
  }
  return { signingKey: derive(master, 'signing'), encryptionKey: derive(master, 'encryption'), fromConfig: configured !== undefined };
}

export function hmacBase64url(key: Buffer, data: string): string {
  return createHmac('sha256', key).update(data).digest('base64url');
}

/** Encrypts with AES-256-GCM; output is `v1.<iv>.<tag>.<ciphertext>` in base64url. */
export function encryptSecret(key: Buffer, plaintext: string): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
  return ['v1', iv.toString('base64url'), cipher.getAuthTag().toString('base64url'), body.toString('base64url')].join('.');
}

export function decryptSecret(key: Buffer, sealed: string): string {
  const [version, iv, tag, body] = sealed.split('.');
  if (version !== 'v1' || !iv || !tag || body === undefined) throw new Error('unrecognised sealed secret');
  const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64url'));
  decipher.setAuthTag(Buffer.from(tag, 'base64url'));
  return Buffer.concat([decipher.update(Buffer.from(body, 'base64url')), decipher.final()]).toString('utf8');
}
