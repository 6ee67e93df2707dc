import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { GetObjectCommand, ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import { ConfigError, loadConfig } from '../../src/config.js';
import { createBlobStore } from '../../src/knowledge/blob-store.js';
import { S3BlobStore, type S3BlobStoreOptions } from '../../src/knowledge/s3-blob-store.js';
import { startTestApp } from '../helpers/app.js';
import { startS3Server, type S3TestServer } from '../helpers/s3-server.js';
import { b64, buildPng } from '../fixtures/knowledge/build.js';
import { chunksOf, ingested, validated } from '../fixtures/knowledge/helpers.js';

// The SDK warns once per process that its 2027 releases need Node 22 (see docs/decisions.md); not news in tests.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED = 'true';

let s3: S3TestServer;
let raw: S3Client;
const stores: S3BlobStore[] = [];

before(async () => {
  s3 = await startS3Server();
  raw = new S3Client({
    endpoint: s3.endpoint,
    region: s3.region,
    forcePathStyle: true,
    credentials: { accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey },
  });
});

after(async () => {
  await Promise.all(stores.map((store) => store.close()));
  raw.destroy();
  await s3.close();
});

function store(overrides: Partial<S3BlobStoreOptions> = {}): S3BlobStore {
  const created = new S3BlobStore({
    bucket: s3.bucket,
    region: s3.region,
    endpoint: s3.endpoint,
    forcePathStyle: true,
    accessKeyId: s3.accessKeyId,
    secretAccessKey: s3.secretAccessKey,
    ...overrides,
  });
  stores.push(created);
  return created;
}

/** The object as the bucket holds it, read with a separate client; undefined when absent. */
async function objectBytes(key: string): Promise<Buffer | undefined> {
  try {
    const output = await raw.send(new GetObjectCommand({ Bucket: s3.bucket, Key: key }));
    return Buffer.from(await output.Body!.transformToByteArray());
  } catch (error) {
    if ((error as Error).name === 'NoSuchKey') return undefined;
    throw error;
  }
}

async function listKeys(prefix: string): Promise<string[]> {
  const output = await raw.send(new ListObjectsV2Command({ Bucket: s3.bucket, Prefix: prefix }));
  return (output.Contents ?? []).map((object) => object.Key!).sort();
}

test('put and get round-trip binary bytes exactly; a missing key is undefined; delete removes', async () => {
  const blobs = store();
  assert.equal(blobs.kind, 's3');
  const everyByte = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
  const large = randomBytes(3 * 1024 * 1024 + 17);
  await blobs.put('ten_rt/ks_small', everyByte);
  await blobs.put('ten_rt/ks_large', large);
  await blobs.put('ten_rt/ks_empty', Buffer.alloc(0));

  assert.deepEqual(await blobs.get('ten_rt/ks_small'), everyByte);
  assert.ok((await blobs.get('ten_rt/ks_large'))!.equals(large), 'a 3 MB random blob comes back byte for byte');
  assert.deepEqual(await blobs.get('ten_rt/ks_empty'), Buffer.alloc(0));
  assert.deepEqual(await objectBytes('ten_rt/ks_small'), everyByte, 'stored under the blob key itself when there is no prefix');

  assert.equal(await blobs.get('ten_rt/ks_missing'), undefined);
  assert.equal(await blobs.get('ten_nobody'), undefined);

  await blobs.put('ten_rt/ks_small', Buffer.from('replaced'));
  assert.equal((await blobs.get('ten_rt/ks_small'))?.toString(), 'replaced');

  await blobs.delete('ten_rt/ks_small');
  assert.equal(await blobs.get('ten_rt/ks_small'), undefined);
  assert.equal(await objectBytes('ten_rt/ks_small'), undefined);
  await blobs.delete('ten_rt/ks_small'); // deleting what is gone is fine, as with the other stores
  assert.deepEqual(await listKeys('ten_rt/'), ['ten_rt/ks_empty', 'ten_rt/ks_large']);
  assert.ok(s3.requests.every((r) => r.auth === 'ok'), 'every request carried a valid SigV4 signature');
});

test('the prefix is applied to every object key, and slashes around it are trimmed', async () => {
  const prefixed = store({ prefix: '/deploy-a/knowledge/' });
  assert.equal(prefixed.objectKey('ten_p/ks_1'), 'deploy-a/knowledge/ten_p/ks_1');
  await prefixed.put('ten_p/ks_1', Buffer.from('under the prefix'));
  assert.deepEqual(await listKeys('deploy-a/'), ['deploy-a/knowledge/ten_p/ks_1']);
  assert.equal((await objectBytes('deploy-a/knowledge/ten_p/ks_1'))?.toString(), 'under the prefix');
  assert.equal(await objectBytes('ten_p/ks_1'), undefined, 'nothing at the bare key');

  assert.equal(await store().get('ten_p/ks_1'), undefined, 'a store without the prefix does not see it');
  assert.equal(await store({ prefix: 'deploy-b' }).get('ten_p/ks_1'), undefined, 'nor does one with another prefix');
  assert.equal((await prefixed.get('ten_p/ks_1'))?.toString(), 'under the prefix');
  await prefixed.delete('ten_p/ks_1');
  assert.deepEqual(await listKeys('deploy-a/'), []);
});

test('invalid keys are refused before any request is made', async () => {
  const blobs = store();
  const before = s3.requests.length;
  for (const key of ['', '../escape', 'ten/../../etc', 'a/b/c/d/e', 'with space/x', 'dot.ted/x', 'ten//x', '/ten/x', 'ten/x/', 'k'.repeat(129)]) {
    await assert.rejects(blobs.put(key, Buffer.from('x')), /invalid blob key/, `put ${JSON.stringify(key)}`);
    await assert.rejects(blobs.get(key), /invalid blob key/, `get ${JSON.stringify(key)}`);
    await assert.rejects(blobs.delete(key), /invalid blob key/, `delete ${JSON.stringify(key)}`);
  }
  assert.equal(s3.requests.length, before, 'the server saw none of them');
});

test('wrong credentials, a wrong region and a missing bucket are errors, and no secret is in them', async () => {
  const secret = 'this-secret-must-never-be-printed';
  const wrongSecret = store({ secretAccessKey: secret });
  for (const attempt of [() => wrongSecret.put('ten_c/ks_1', Buffer.from('x')), () => wrongSecret.get('ten_c/ks_1'), () => wrongSecret.delete('ten_c/ks_1')]) {
    await assert.rejects(attempt, (error: Error) => {
      assert.match(error.message, /SignatureDoesNotMatch/);
      assert.match(error.message, /s3:\/\/knowledge-test\/ten_c\/ks_1/);
      assert.ok(!error.message.includes(secret) && !String(error.stack).includes(secret));
      return true;
    });
  }
  assert.equal(await objectBytes('ten_c/ks_1'), undefined, 'the refused put stored nothing');

  await assert.rejects(store({ accessKeyId: 'AKIAUNKNOWN', secretAccessKey: secret }).get('ten_c/ks_1'), /InvalidAccessKeyId/);
  await assert.rejects(store({ region: 'eu-west-1' }).get('ten_c/ks_1'), /AuthorizationHeaderMalformed/);
  await assert.rejects(store({ bucket: 'no-such-bucket' }).get('ten_c/ks_1'), /NoSuchBucket/, 'a missing bucket is not a missing blob');
});

test('a server that never answers fails the call within the request timeout', async () => {
  const sockets = new Set<import('node:net').Socket>();
  const silent = http.createServer(() => undefined);
  silent.on('connection', (socket) => sockets.add(socket));
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
  try {
    const blobs = store({ endpoint: `http://127.0.0.1:${(silent.address() as AddressInfo).port}`, requestTimeoutMs: 300, maxAttempts: 1 });
    const started = Date.now();
    await assert.rejects(blobs.get('ten_t/ks_1'), /S3 GET .* failed: TimeoutError/);
    assert.ok(Date.now() - started < 5_000, `took ${Date.now() - started} ms`);
  } finally {
    for (const socket of sockets) socket.destroy();
    await new Promise<void>((resolve) => silent.close(() => resolve()));
  }
});

test('BLOB_STORE selects the store; s3 needs a bucket and both keys or neither', async () => {
  const s3Env = { BLOB_STORE: 's3', S3_BUCKET: 'kb-bucket', S3_ACCESS_KEY_ID: 'id', S3_SECRET_ACCESS_KEY: 'secret' };
  assert.deepEqual(loadConfig({}, []).blobStore, { kind: 'filesystem' });
  assert.deepEqual(loadConfig({ ...s3Env, S3_PREFIX: '/a/b/', S3_ENDPOINT: 'http://127.0.0.1:9000', S3_FORCE_PATH_STYLE: 'true' }, []).blobStore, {
    kind: 's3',
    bucket: 'kb-bucket',
    region: 'us-east-1',
    endpoint: 'http://127.0.0.1:9000',
    forcePathStyle: true,
    accessKeyId: 'id',
    secretAccessKey: 'secret',
    prefix: 'a/b',
  });
  const noKeys = loadConfig({ BLOB_STORE: 's3', S3_BUCKET: 'kb-bucket', S3_REGION: 'auto' }, []).blobStore;
  assert.ok(noKeys.kind === 's3' && noKeys.region === 'auto' && noKeys.accessKeyId === undefined && !noKeys.forcePathStyle && noKeys.prefix === undefined);

  const refused: Array<[Record<string, string>, RegExp]> = [
    [{ BLOB_STORE: 's3' }, /BLOB_STORE=s3 needs S3_BUCKET/],
    [{ BLOB_STORE: 'memory' }, /BLOB_STORE must be filesystem or s3/],
    [{ ...s3Env, S3_SECRET_ACCESS_KEY: '' }, /S3_ACCESS_KEY_ID and S3_SECRET_ACCESS_KEY go together/],
    [{ ...s3Env, S3_ENDPOINT: 'ftp://files' }, /S3_ENDPOINT must be an http\(s\) URL/],
    [{ ...s3Env, S3_FORCE_PATH_STYLE: 'yes' }, /S3_FORCE_PATH_STYLE must be true or false/],
    [{ ...s3Env, S3_PREFIX: 'a/../b' }, /S3_PREFIX/],
    [{ ...s3Env, S3_BUCKET: 'a b' }, /S3_BUCKET/],
  ];
  for (const [env, message] of refused) assert.throws(() => loadConfig(env, []), (error: Error) => error instanceof ConfigError && message.test(error.message), JSON.stringify(env));
  assert.throws(
    () => loadConfig({ ...s3Env, S3_ENDPOINT: 'http://user:hunter2@minio' }, []),
    (error: Error) => error instanceof ConfigError && !error.message.includes('hunter2'),
    'an endpoint with credentials in it is refused without echoing them',
  );

  const memory = loadConfig({ DATA_DIR: 'memory://' }, []);
  assert.equal(createBlobStore(memory).kind, 'memory');
  const chosen = createBlobStore({ ...memory, blobStore: loadConfig(s3Env, []).blobStore });
  assert.ok(chosen instanceof S3BlobStore && chosen.bucket === 'kb-bucket', 'BLOB_STORE=s3 wins over DATA_DIR=memory://');
});

test('end to end: with BLOB_STORE=s3 an uploaded asset and a file source live in the bucket and are processed from it', async () => {
  const app = await startTestApp({
    startWorkers: true,
    env: {
      BLOB_STORE: 's3',
      S3_BUCKET: s3.bucket,
      S3_REGION: s3.region,
      S3_ENDPOINT: s3.endpoint,
      S3_FORCE_PATH_STYLE: 'true',
      S3_ACCESS_KEY_ID: s3.accessKeyId,
      S3_SECRET_ACCESS_KEY: s3.secretAccessKey,
      S3_PREFIX: 'e2e',
    },
  });
  try {
    assert.equal(app.runtime.services.blobs.kind, 's3');
    const { tenantId } = await app.tenantWithKey(['knowledge:read']);
    const png = buildPng();
    const uploaded = await app.adminRaw('POST', `/tenants/${tenantId}/knowledge/assets`, {
      title: 'Pool',
      filename: 'pool.png',
      contentType: 'image/png',
      contentBase64: b64(png),
    });
    assert.equal(uploaded.statusCode, 201, uploaded.body);
    const { sourceId } = uploaded.json() as { sourceId: string };
    assert.deepEqual(await objectBytes(`e2e/${tenantId}/${sourceId}`), png, "the asset's bytes are in the bucket under the prefix");
    const row = await validated(app, tenantId, sourceId);
    assert.equal(row.validation_status, 'ready', JSON.stringify(row.validation_findings));
    assert.equal(row.blob_key, `${tenantId}/${sourceId}`, 'the database keeps the blob key, not the object key');

    const markdown = '# Pool\n\nThe pool opens at 9 am and closes at 8 pm.';
    const file = await app.admin<{ sourceId: string }>('POST', `/tenants/${tenantId}/knowledge/sources`, {
      sourceType: 'file',
      title: 'Pool rules',
      file: { filename: 'pool.md', contentType: 'text/markdown', contentBase64: b64(markdown) },
    });
    assert.equal((await objectBytes(`e2e/${tenantId}/${file.sourceId}`))?.toString(), markdown);
    const ingestedRow = await ingested(app, tenantId, file.sourceId);
    assert.equal(ingestedRow.ingest_status, 'ready');
    assert.match((await chunksOf(app, file.sourceId)).map((c) => c.text).join('\n'), /The pool opens at 9 am/);

    assert.deepEqual(await listKeys(`e2e/${tenantId}/`), [`e2e/${tenantId}/${file.sourceId}`, `e2e/${tenantId}/${sourceId}`].sort());
  } finally {
    await (app.runtime.services.blobs as S3BlobStore).close();
    await app.close();
  }
});
