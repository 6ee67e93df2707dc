import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import S3rver from 's3rver';

/**
 * A real S3-compatible server for tests: s3rver (objects on disk under a temporary directory) on
 * 127.0.0.1, path-style addressing. s3rver checks only that the access key id exists, not SigV4
 * signatures, so every request first passes our own SigV4 check of the Authorization header against
 * `accessKeyId`/`secretAccessKey` and `region` (unsigned or wrongly signed requests get S3's 403
 * errors). The payload hash is taken as declared in x-amz-content-sha256; the body is not re-hashed.
 */
export interface S3TestServer {
  endpoint: string;
  region: string;
  bucket: string;
  accessKeyId: string;
  secretAccessKey: string;
  /** Every request seen: method, path and the outcome of the signature check. */
  requests: Array<{ method: string; path: string; auth: 'ok' | 'rejected' }>;
  close(): Promise<void>;
}

// s3rver's built-in account; it refuses any other access key id on its own.
const ACCESS_KEY_ID = 'S3RVER';
const SECRET_ACCESS_KEY = 'S3RVER';

export async function startS3Server(options: { bucket?: string; region?: string } = {}): Promise<S3TestServer> {
  const bucket = options.bucket ?? 'knowledge-test';
  const region = options.region ?? 'us-east-1';
  const directory = await mkdtemp(path.join(tmpdir(), 'm2m-s3rver-'));
  const s3rver = new S3rver({ silent: true, directory, vhostBuckets: false, configureBuckets: [{ name: bucket, configs: [] }] });
  await s3rver.configureBuckets();
  const handle = s3rver.callback();
  const requests: S3TestServer['requests'] = [];

  const server = http.createServer((req, res) => {
    const problem = checkSignature(req, { accessKeyId: ACCESS_KEY_ID, secretAccessKey: SECRET_ACCESS_KEY, region });
    requests.push({ method: req.method ?? '', path: (req.url ?? '').split('?')[0], auth: problem ? 'rejected' : 'ok' });
    if (problem) {
      req.resume();
      res.writeHead(403, { 'content-type': 'application/xml' });
      res.end(`<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>${problem.code}</Code><Message>${problem.message}</Message></Error>`);
      return;
    }
    handle(req, res);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;

  return {
    endpoint: `http://127.0.0.1:${port}`,
    region,
    bucket,
    accessKeyId: ACCESS_KEY_ID,
    secretAccessKey: SECRET_ACCESS_KEY,
    requests,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await rm(directory, { recursive: true, force: true });
    },
  };
}

const hmac = (key: Buffer | string, data: string) => createHmac('sha256', key).update(data).digest();

/** RFC 3986 encoding as SigV4 wants it (encodeURIComponent leaves !'()* alone). */
const encode = (value: string) => encodeURIComponent(value).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);

/** Verifies an `AWS4-HMAC-SHA256` Authorization header; returns the S3 error to answer with, or undefined. */
function checkSignature(
  req: http.IncomingMessage,
  account: { accessKeyId: string; secretAccessKey: string; region: string },
): { code: string; message: string } | undefined {
  const authorization = req.headers.authorization;
  if (!authorization) return { code: 'AccessDenied', message: 'Anonymous access is denied: requests must be signed' };
  const match = /^AWS4-HMAC-SHA256 Credential=([^/]+)\/(\d{8})\/([^/]+)\/s3\/aws4_request, ?SignedHeaders=([a-z0-9;-]+), ?Signature=([0-9a-f]{64})$/.exec(authorization);
  if (!match) return { code: 'AccessDenied', message: 'Only AWS4-HMAC-SHA256 header signatures are accepted' };
  const [, accessKeyId, date, region, signedHeaders, signature] = match;
  if (accessKeyId !== account.accessKeyId) return { code: 'InvalidAccessKeyId', message: 'The AWS Access Key Id you provided does not exist in our records.' };
  if (region !== account.region) return { code: 'AuthorizationHeaderMalformed', message: `the region '${region}' is wrong; expecting '${account.region}'` };
  const amzDate = String(req.headers['x-amz-date'] ?? '');
  const payloadHash = String(req.headers['x-amz-content-sha256'] ?? '');
  if (!amzDate.startsWith(date) || !payloadHash) return { code: 'AccessDenied', message: 'x-amz-date and x-amz-content-sha256 must be sent and signed' };
  const names = signedHeaders.split(';');
  if (!names.includes('host') || !names.includes('x-amz-date') || !names.includes('x-amz-content-sha256')) {
    return { code: 'AccessDenied', message: 'host, x-amz-date and x-amz-content-sha256 must be signed' };
  }

  const url = new URL(req.url ?? '/', 'http://placeholder');
  const query = [...url.searchParams]
    .map(([key, value]) => [encode(key), encode(value)])
    .sort(([a, x], [b, y]) => (a < b ? -1 : a > b ? 1 : x < y ? -1 : x > y ? 1 : 0))
    .map(([key, value]) => `${key}=${value}`)
    .join('&');
  const headers = names.map((name) => `${name}:${String(req.headers[name] ?? '').trim().replace(/\s+/g, ' ')}\n`).join('');
  // S3 signs the path as sent (no normalisation, no double encoding).
  const canonical = [req.method, url.pathname, query, headers, signedHeaders, payloadHash].join('\n');
  const scope = `${date}/${region}/s3/aws4_request`;
  const stringToSign = ['AWS4-HMAC-SHA256', amzDate, scope, createHash('sha256').update(canonical).digest('hex')].join('\n');
  const signingKey = hmac(hmac(hmac(hmac(`AWS4${account.secretAccessKey}`, date), region), 's3'), 'aws4_request');
  const expected = hmac(signingKey, stringToSign);
  if (!timingSafeEqual(expected, Buffer.from(signature, 'hex'))) {
    return { code: 'SignatureDoesNotMatch', message: 'The request signature we calculated does not match the signature you provided.' };
  }
  return undefined;
}
