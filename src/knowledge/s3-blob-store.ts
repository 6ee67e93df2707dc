import type { S3Client, S3ClientConfig } from '@aws-sdk/client-s3';
import { checkKey, type BlobStore } from './blob-key.js';

type S3Sdk = typeof import('@aws-sdk/client-s3');

export interface S3BlobStoreOptions {
  bucket: string;
  region: string;
  /** An S3-compatible endpoint (MinIO, R2, ...); unset: AWS S3. */
  endpoint?: string | undefined;
  /** `<endpoint>/<bucket>/<key>` instead of `<bucket>.<host>/<key>` (MinIO and most self-hosted servers). */
  forcePathStyle?: boolean;
  /** Both or neither; neither: the AWS SDK's default credential chain. */
  accessKeyId?: string | undefined;
  secretAccessKey?: string | undefined;
  /** Prepended to every key with a `/` (no leading or trailing slash). */
  prefix?: string | undefined;
  /** Deadline of the TCP/TLS connect (default 5 s). */
  connectionTimeoutMs?: number;
  /** Deadline until the response headers, and the longest the socket may sit idle (default 30 s). */
  requestTimeoutMs?: number;
  /** Attempts of one operation, retries included (default 3; the SDK backs off between them). */
  maxAttempts?: number;
}

/**
 * Objects in an S3 bucket (AWS or S3-compatible), one per blob key, under an optional prefix. The AWS
 * SDK is loaded on first use, so filesystem deployments never pay for it. Errors name the operation,
 * bucket and key and the S3 error code; credentials never appear in them.
 */
export class S3BlobStore implements BlobStore {
  readonly kind = 's3' as const;
  readonly bucket: string;
  readonly prefix: string | undefined;
  private readonly config: S3ClientConfig;
  private sdk: Promise<{ sdk: S3Sdk; client: S3Client }> | undefined;

  constructor(options: S3BlobStoreOptions) {
    this.bucket = options.bucket;
    this.prefix = options.prefix?.replace(/^\/+|\/+$/g, '') || undefined;
    const requestTimeout = options.requestTimeoutMs ?? 30_000;
    this.config = {
      region: options.region,
      ...(options.endpoint ? { endpoint: options.endpoint } : {}),
      forcePathStyle: options.forcePathStyle ?? false,
      ...(options.accessKeyId && options.secretAccessKey
        ? { credentials: { accessKeyId: options.accessKeyId, secretAccessKey: options.secretAccessKey } }
        : {}),
      maxAttempts: options.maxAttempts ?? 3,
      requestHandler: {
        connectionTimeout: options.connectionTimeoutMs ?? 5_000,
        requestTimeout,
        throwOnRequestTimeout: true,
        socketTimeout: requestTimeout,
      },
    };
  }

  /** The object key of a blob key: `<prefix>/<key>`. */
  objectKey(key: string): string {
    checkKey(key);
    return this.prefix ? `${this.prefix}/${key}` : key;
  }

  private connect(): Promise<{ sdk: S3Sdk; client: S3Client }> {
    this.sdk ??= import('@aws-sdk/client-s3').then((sdk) => ({ sdk, client: new sdk.S3Client(this.config) }));
    return this.sdk;
  }

  private failure(operation: string, objectKey: string, error: unknown): Error {
    const name = error instanceof Error ? error.name : 'Error';
    const message = error instanceof Error ? error.message : String(error);
    return new Error(`S3 ${operation} s3://${this.bucket}/${objectKey} failed: ${name}: ${message}`, { cause: error });
  }

  async put(key: string, bytes: Buffer): Promise<void> {
    const objectKey = this.objectKey(key);
    const { sdk, client } = await this.connect();
    try {
      await client.send(new sdk.PutObjectCommand({ Bucket: this.bucket, Key: objectKey, Body: bytes, ContentType: 'application/octet-stream' }));
    } catch (error) {
      throw this.failure('PUT', objectKey, error);
    }
  }

  async get(key: string): Promise<Buffer | undefined> {
    const objectKey = this.objectKey(key);
    const { sdk, client } = await this.connect();
    try {
      const output = await client.send(new sdk.GetObjectCommand({ Bucket: this.bucket, Key: objectKey }));
      if (!output.Body) return Buffer.alloc(0);
      const bytes = await output.Body.transformToByteArray();
      return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    } catch (error) {
      if (isMissingObject(sdk, error)) return undefined;
      throw this.failure('GET', objectKey, error);
    }
  }

  async delete(key: string): Promise<void> {
    const objectKey = this.objectKey(key);
    const { sdk, client } = await this.connect();
    try {
      // S3 answers 204 whether or not the object existed.
      await client.send(new sdk.DeleteObjectCommand({ Bucket: this.bucket, Key: objectKey }));
    } catch (error) {
      throw this.failure('DELETE', objectKey, error);
    }
  }

  /** Closes the client's idle connections (its sockets do not keep the process alive in the meantime). */
  async close(): Promise<void> {
    const connected = this.sdk;
    this.sdk = undefined;
    if (connected) (await connected).client.destroy();
  }
}

/** NoSuchKey, or a bare 404 (servers that send no error body); a missing bucket is a real error. */
function isMissingObject(sdk: S3Sdk, error: unknown): boolean {
  if (error instanceof sdk.NoSuchKey) return true;
  if (!(error instanceof sdk.S3ServiceException)) return false;
  return error.name === 'NoSuchKey' || (error.$metadata.httpStatusCode === 404 && error.name !== 'NoSuchBucket');
}
