import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startTestApp, type TestApp } from '../helpers/app.js';
import type { MemoryBlobStore } from '../../src/knowledge/blob-store.js';
import { ELF, EXE, JPEG, b64, buildDocx, buildPdf, buildPng } from '../fixtures/knowledge/build.js';
import { READ, WRITE, addProperty, listItems, textSource, validated } from '../fixtures/knowledge/helpers.js';

let app: TestApp;

before(async () => {
  app = await startTestApp({ startWorkers: true, env: { UNSAFE_ALLOW_PRIVATE_DESTINATIONS: 'true', DATA_DIR: 'memory://' } });
});
after(() => app.close());

type Asset = { sourceId: string; validationStatus: string; validationFindings: string[]; mediaType?: string; propertyId?: string; folderId?: string };
type Folder = { folderId: string; shareTokenVersion: number; assetOrder: string[]; assetCount: number; active: boolean; sharePath?: string; description?: string; propertyId?: string; title: string };

function upload(tenantId: string, fields: { bytes: Buffer | string; contentType: string; filename?: string; title?: string; folderId?: string; propertyId?: string; description?: string }) {
  return app.adminRaw('POST', `/tenants/${tenantId}/knowledge/assets`, {
    title: fields.title ?? 'Asset',
    filename: fields.filename ?? 'file.bin',
    contentType: fields.contentType,
    contentBase64: b64(fields.bytes),
    ...(fields.folderId ? { folderId: fields.folderId } : {}),
    ...(fields.propertyId ? { propertyId: fields.propertyId } : {}),
    ...(fields.description !== undefined ? { description: fields.description } : {}),
  });
}

async function asset(tenantId: string, fields: Parameters<typeof upload>[1]): Promise<Asset> {
  const res = await upload(tenantId, fields);
  assert.equal(res.statusCode, 201, res.body);
  return res.json();
}

async function folder(tenantId: string, body: Record<string, unknown> = { title: 'Welcome pack' }): Promise<Folder> {
  return app.admin<Folder>('POST', `/tenants/${tenantId}/knowledge/asset-folders`, body);
}

test('validation sniffs the bytes: ready, blocked, unsupported, with readable findings', async () => {
  const { tenantId } = await app.tenantWithKey(READ);
  const cases: Array<[string, Buffer | string, string, string, RegExp | null]> = [
    ['png', buildPng(), 'image/png', 'ready', null],
    ['jpeg declared as image/jpg', JPEG, 'image/jpg', 'ready', null],
    ['pdf', buildPdf([['Menu']]), 'application/pdf', 'ready', null],
    ['docx', buildDocx([{ text: 'Hi' }]), 'application/vnd.openxmlformats-officedocument.wordprocessingml.document', 'ready', null],
    ['plain text', 'Opening hours: 9 to 5', 'text/plain; charset=utf-8', 'ready', null],
    ['a PDF declared as PNG', buildPdf([['x']]), 'image/png', 'blocked', /declared image\/png, but the bytes are application\/pdf/],
    ['a Windows executable', EXE, 'application/pdf', 'blocked', /executable/],
    ['an ELF binary declared as an image', ELF, 'image/png', 'blocked', /executable/],
    ['a shell script', '#!/bin/sh\nrm -rf /\n', 'text/plain', 'blocked', /executable or script/],
    ['text declared as an image', '<html><script>alert(1)</script></html>', 'image/gif', 'blocked', /the bytes are text/],
    ['unknown bytes', Buffer.from([0x01, 0x02, 0x03, 0xfe, 0xff, 0x00, 0x10]), 'image/png', 'unsupported', /could not be identified/],
    ['svg', '<svg xmlns="http://www.w3.org/2000/svg"/>', 'image/svg+xml', 'unsupported', /not a supported asset type/],
    ['an image over 5 MB', buildPng(5 * 1024 * 1024 + 10), 'image/png', 'unsupported', /images may be at most 5\.0 MB/],
  ];
  const created = [];
  for (const [what, bytes, contentType] of cases) {
    const a = await asset(tenantId, { bytes, contentType, title: what });
    assert.equal(a.validationStatus, 'pending', what);
    assert.deepEqual(a.validationFindings, []);
    created.push(a);
  }
  for (const [i, [what, , , status, finding]] of cases.entries()) {
    const row = await validated(app, tenantId, created[i].sourceId);
    assert.equal(row.validation_status, status, `${what}: ${JSON.stringify(row.validation_findings)}`);
    if (finding) assert.match(row.validation_findings!.join(' '), finding, what);
    else assert.deepEqual(row.validation_findings, [], what);
  }
  const { key } = await app.tenantWithKey(READ);
  assert.equal((await listItems(app, key)).json().items.length, 0, 'assets of one tenant are invisible to another');
});

test('validation fails readably when the stored bytes are gone', async () => {
  const { tenantId } = await app.tenantWithKey(READ);
  await app.runtime.runner.stop(1_000);
  try {
    const a = await asset(tenantId, { bytes: buildPng(), contentType: 'image/png' });
    await app.runtime.services.blobs.delete(`${tenantId}/${a.sourceId}`);
  } finally {
    await app.runtime.runner.start();
  }
  const rows = await app.runtime.services.db.query<{ id: string }>(`SELECT id FROM knowledge_sources WHERE tenant_id = $1`, [tenantId]);
  const row = await validated(app, tenantId, rows[0].id);
  assert.equal(row.validation_status, 'failed');
  assert.match(row.validation_findings![0], /could not be found/);
});

test('uploads over the limits are 413; bad fields are 400; nothing is half-written', async () => {
  const { tenantId } = await app.tenantWithKey(READ);
  const tooBig = await upload(tenantId, { bytes: Buffer.alloc(10 * 1024 * 1024 + 1, 1), contentType: 'application/pdf' });
  assert.equal(tooBig.statusCode, 413);
  assert.equal(tooBig.json().error.code, 'M2M_PAYLOAD_TOO_LARGE');
  const overBody = await app.adminRaw('POST', `/tenants/${tenantId}/knowledge/assets`, { title: 'x', filename: 'x', contentType: 'image/png', contentBase64: 'A'.repeat(16 * 1024 * 1024) });
  assert.equal(overBody.statusCode, 413);
  assert.equal(overBody.json().error.code, 'M2M_PAYLOAD_TOO_LARGE');

  const bad: Array<[Record<string, unknown>, RegExp]> = [
    [{ title: 't'.repeat(161) }, /title/],
    [{ description: 'd'.repeat(601) }, /description/],
    [{ filename: 'f'.repeat(256) }, /filename/],
    [{ contentType: 'c'.repeat(129) }, /contentType/],
    [{ contentBase64: 'not base64!' }, /base64/],
    [{ folderId: 'f'.repeat(129) }, /folderId/],
  ];
  for (const [override, message] of bad) {
    const res = await app.adminRaw('POST', `/tenants/${tenantId}/knowledge/assets`, { title: 'x', filename: 'x.png', contentType: 'image/png', contentBase64: b64(buildPng()), ...override });
    assert.equal(res.statusCode, 400, JSON.stringify(override).slice(0, 60));
    assert.match(res.json().error.message, message);
  }
  const inactive = await folder(tenantId);
  await app.api((await app.admin<{ key: string }>('POST', `/tenants/${tenantId}/api-keys`, { name: 'w', scopes: WRITE })).key, 'PATCH', `/knowledge/asset-folders/${inactive.folderId}`, { active: false });
  const intoInactive = await upload(tenantId, { bytes: buildPng(), contentType: 'image/png', folderId: inactive.folderId });
  assert.equal(intoInactive.statusCode, 409);
  const missingFolder = await upload(tenantId, { bytes: buildPng(), contentType: 'image/png', folderId: 'fld_missing' });
  assert.equal(missingFolder.statusCode, 404);

  const db = app.runtime.services.db;
  assert.equal((await db.query('SELECT id FROM knowledge_sources WHERE tenant_id = $1', [tenantId])).length, 0);
  assert.equal((await db.query('SELECT id FROM jobs WHERE tenant_id = $1', [tenantId])).length, 0);
  const blobs = app.runtime.services.blobs as MemoryBlobStore;
  assert.deepEqual(blobs.keys().filter((k) => k.startsWith(`${tenantId}/`)), [], 'no stored bytes without their row');
});

test('folders: only supplied fields change, empty description clears, scope propagates to member assets', async () => {
  const { tenantId, key } = await app.tenantWithKey(WRITE);
  const beach = await addProperty(app, tenantId, 'Beach');
  const city = await addProperty(app, tenantId, 'City');
  const created = await app.api(key, 'POST', '/knowledge/asset-folders', { title: 'Spa menu', description: 'Treatments and prices', propertyId: beach });
  assert.equal(created.statusCode, 201, created.body);
  const f: Folder = created.json().folder;
  assert.equal(f.shareTokenVersion, 1);
  assert.deepEqual(f.assetOrder, []);
  assert.equal(f.assetCount, 0);
  const a1 = await asset(tenantId, { bytes: buildPng(), contentType: 'image/png', folderId: f.folderId, title: 'Massage room' });
  const a2 = await asset(tenantId, { bytes: JPEG, contentType: 'image/jpeg', folderId: f.folderId, title: 'Sauna' });
  assert.equal(a1.propertyId, beach, 'an asset takes its folder scope');
  const wrongScope = await upload(tenantId, { bytes: JPEG, contentType: 'image/jpeg', folderId: f.folderId, propertyId: city });
  assert.equal(wrongScope.statusCode, 400);

  const patch = async (body: Record<string, unknown>) => {
    const res = await app.api(key, 'PATCH', `/knowledge/asset-folders/${f.folderId}`, body);
    assert.equal(res.statusCode, 200, res.body);
    return res.json().folder as Folder;
  };
  let current = await patch({ title: 'Spa' });
  assert.equal(current.title, 'Spa');
  assert.equal(current.description, 'Treatments and prices', 'untouched');
  assert.equal(current.propertyId, beach, 'untouched');
  assert.deepEqual(current.assetOrder, [a1.sourceId, a2.sourceId]);
  assert.equal(current.assetCount, 2);
  current = await patch({ description: '' });
  assert.equal(current.description, undefined);
  assert.equal(current.title, 'Spa');
  current = await patch({ propertyId: city });
  assert.equal(current.propertyId, city);
  current = await patch({ propertyId: null });
  assert.equal(current.propertyId, undefined);
  const items = (await listItems(app, key, { propertyFilter: 'global', sourceType: 'file' })).json().items;
  assert.deepEqual(items.map((i: { sourceId: string }) => i.sourceId).sort(), [a1.sourceId, a2.sourceId].sort(), 'member assets became global');
  assert.ok(items.every((i: { scope: string; asset: { propertyId?: string } }) => i.scope === 'global' && i.asset.propertyId === undefined));

  for (const [body, status] of [[{}, 400], [{ title: '' }, 400], [{ title: 't'.repeat(161) }, 400], [{ description: 'd'.repeat(601) }, 400], [{ propertyId: 'prop_none' }, 404], [{ shareTokenVersion: 5 }, 400]] as const) {
    const res = await app.api(key, 'PATCH', `/knowledge/asset-folders/${f.folderId}`, body);
    assert.equal(res.statusCode, status, JSON.stringify(body));
  }
  assert.equal((await app.api(key, 'PATCH', `/knowledge/asset-folders/${'f'.repeat(129)}`, { title: 'x' })).statusCode, 400);
  const other = await app.tenantWithKey(WRITE);
  const foreign = await app.api(other.key, 'PATCH', `/knowledge/asset-folders/${f.folderId}`, { title: 'Mine now' });
  assert.equal(foreign.statusCode, 404);
  assert.equal(foreign.json().error.code, 'M2M_NOT_FOUND');
  const reader = await app.tenantWithKey(READ);
  assert.equal((await app.api(reader.key, 'PATCH', `/knowledge/asset-folders/${f.folderId}`, { title: 'x' })).statusCode, 403);
  assert.equal((await app.api(reader.key, 'POST', '/knowledge/asset-folders', { title: 'x' })).statusCode, 403);
  const foreignProperty = await addProperty(app, other.tenantId);
  assert.equal((await app.api(key, 'POST', '/knowledge/asset-folders', { title: 'x', propertyId: foreignProperty })).statusCode, 404);
  assert.equal((await app.api(key, 'PATCH', `/knowledge/asset-folders/${f.folderId}`, { propertyId: foreignProperty })).statusCode, 404);
  assert.equal((await app.api(key, 'POST', '/knowledge/asset-folders', { title: 't'.repeat(161) })).statusCode, 400);
});

test('moving assets in and out of folders', async () => {
  const { tenantId, key } = await app.tenantWithKey(WRITE);
  const beach = await addProperty(app, tenantId, 'Beach');
  const f = await folder(tenantId, { title: 'Rooms', propertyId: beach });
  const g = await folder(tenantId, { title: 'Global' });
  const a = await asset(tenantId, { bytes: buildPng(), contentType: 'image/png' });
  const b = await asset(tenantId, { bytes: JPEG, contentType: 'image/jpeg' });
  const move = (sourceId: string, folderId: string | null) => app.api(key, 'PATCH', `/knowledge/sources/${sourceId}/folder`, { folderId });

  let res = await move(a.sourceId, f.folderId);
  assert.equal(res.statusCode, 200, res.body);
  assert.deepEqual(Object.keys(res.json()), ['asset']);
  assert.equal(res.json().asset.folderId, f.folderId);
  assert.equal(res.json().asset.propertyId, beach);
  assert.equal(res.json().asset.propertyName, 'Beach');
  await move(b.sourceId, f.folderId);
  const folderAfter = async (id: string) => (await app.api(key, 'PATCH', `/knowledge/asset-folders/${id}`, { active: true })).json().folder as Folder;
  assert.deepEqual((await folderAfter(f.folderId)).assetOrder, [a.sourceId, b.sourceId]);
  assert.equal((await move(a.sourceId, f.folderId)).statusCode, 200, 'moving into the same folder changes nothing');
  assert.deepEqual((await folderAfter(f.folderId)).assetOrder, [a.sourceId, b.sourceId]);

  res = await move(a.sourceId, g.folderId);
  assert.equal(res.json().asset.propertyId, undefined, 'takes the global scope of the new folder');
  assert.deepEqual((await folderAfter(f.folderId)).assetOrder, [b.sourceId]);
  assert.equal((await folderAfter(g.folderId)).assetCount, 1);
  res = await move(a.sourceId, null);
  assert.equal(res.json().asset.folderId, undefined);
  assert.equal((await folderAfter(g.folderId)).assetCount, 0);

  await app.api(key, 'PATCH', `/knowledge/asset-folders/${g.folderId}`, { active: false });
  const inactive = await move(a.sourceId, g.folderId);
  assert.equal(inactive.statusCode, 409);
  assert.equal(inactive.json().error.code, 'M2M_CONFLICT');

  const other = await app.tenantWithKey(WRITE);
  const otherFolder = await folder(other.tenantId);
  const text = await textSource(app, tenantId, { title: 'Not an asset', text: 'x' });
  for (const [sourceId, folderId, what] of [
    [a.sourceId, otherFolder.folderId, 'a folder of another tenant'],
    [text.sourceId, f.folderId, 'a source that is not an asset'],
    ['ks_missing', f.folderId, 'an unknown asset'],
    [a.sourceId, 'fld_missing', 'an unknown folder'],
  ]) {
    const r = await move(sourceId, folderId);
    assert.equal(r.statusCode, 404, what);
    assert.equal(r.json().error.code, 'M2M_NOT_FOUND');
  }
  assert.equal((await app.api(other.key, 'PATCH', `/knowledge/sources/${a.sourceId}/folder`, { folderId: null })).statusCode, 404, "another tenant's asset");
  assert.equal((await move('s'.repeat(129), null)).statusCode, 400);
  assert.equal((await move(a.sourceId, 'f'.repeat(129))).statusCode, 400);
  assert.equal((await app.api(key, 'PATCH', `/knowledge/sources/${a.sourceId}/folder`, {})).statusCode, 400, 'folderId is required (null to remove)');
});

test('share links list and serve ready assets, and stop working once the folder is deactivated', async () => {
  const { tenantId, key } = await app.tenantWithKey(WRITE);
  const f = await folder(tenantId, { title: 'Guest guide', description: 'Everything <you> need' });
  const png = buildPng();
  const first = await asset(tenantId, { bytes: png, contentType: 'image/png', filename: 'map é.png', title: 'Map', folderId: f.folderId });
  const blocked = await asset(tenantId, { bytes: EXE, contentType: 'image/png', title: 'Evil', folderId: f.folderId });
  const second = await asset(tenantId, { bytes: buildPdf([['Menu']]), contentType: 'application/pdf', filename: 'menu.pdf', title: 'Menu', folderId: f.folderId });
  for (const a of [first, blocked, second]) await validated(app, tenantId, a.sourceId);
  assert.ok(f.sharePath);
  const get = (url: string, headers: Record<string, string> = {}) => app.runtime.app.inject({ method: 'GET', url, headers });

  const listing = await get(f.sharePath!);
  assert.equal(listing.statusCode, 200, listing.body);
  const body = listing.json();
  assert.equal(body.folder.title, 'Guest guide');
  assert.deepEqual(body.assets.map((a: { sourceId: string }) => a.sourceId), [first.sourceId, second.sourceId], 'ready assets only, in folder order');
  const bytes = await get(body.assets[0].url);
  assert.equal(bytes.statusCode, 200);
  assert.equal(bytes.headers['content-type'], 'image/png');
  assert.equal(bytes.headers['x-content-type-options'], 'nosniff');
  assert.match(String(bytes.headers['content-disposition']), /filename\*=UTF-8''map%20%C3%A9\.png/);
  assert.deepEqual(bytes.rawPayload, png);
  const html = await get(f.sharePath!, { accept: 'text/html' });
  assert.match(String(html.headers['content-type']), /text\/html/);
  assert.match(html.body, /Everything &#60;you&#62; need/);
  assert.equal((await get(body.assets[0].url.replace(first.sourceId, blocked.sourceId))).statusCode, 404, 'a blocked asset is never served');

  const forged = f.sharePath!.replace(/sig=[^&]+/, 'sig=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA');
  assert.equal((await get(forged)).statusCode, 404);
  assert.equal((await get(f.sharePath!.replace('v=1', 'v=2'))).statusCode, 404, 'the version is signed');

  const off = await app.api(key, 'PATCH', `/knowledge/asset-folders/${f.folderId}`, { active: false });
  assert.equal(off.json().folder.shareTokenVersion, 2, 'deactivation bumps the token version');
  assert.equal(off.json().folder.sharePath, undefined);
  assert.equal((await get(f.sharePath!)).statusCode, 404, 'revoked');
  assert.equal((await get(body.assets[0].url)).statusCode, 404);
  assert.equal((await get(f.sharePath!)).json().error.code, 'M2M_NOT_FOUND');

  const on = (await app.api(key, 'PATCH', `/knowledge/asset-folders/${f.folderId}`, { active: true })).json().folder as Folder;
  assert.equal(on.shareTokenVersion, 2);
  assert.notEqual(on.sharePath, f.sharePath);
  assert.equal((await get(on.sharePath!)).statusCode, 200, 'a new link works after re-activation');
  assert.equal((await get(f.sharePath!)).statusCode, 404, 'the old link stays dead');
  assert.equal((await app.api(key, 'PATCH', `/knowledge/asset-folders/${f.folderId}`, { active: true })).json().folder.shareTokenVersion, 2, 'no bump without a deactivation');
});
