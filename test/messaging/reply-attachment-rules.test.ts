import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { asset, reason, send, startKinds, world, type KindsHarness } from '../helpers/kinds-world.js';
import { ELF } from '../fixtures/knowledge/build.js';

// What a reply's body must be (decisions 7.2): text, an asset or both; an attachable asset (active, validated, in an
// active folder or none) else 409 asset_not_eligible; a caption of at most 1024 code points; replyToMessageId a
// message of the conversation. A refused reply writes nothing and keeps no copy of the asset.

let h: KindsHarness;
before(async () => {
  h = await startKinds();
});
after(async () => {
  await h.close();
});

function issuePath(res: { json(): unknown }): string | undefined {
  return (res.json() as { error: { details: { issues?: Array<{ path: string }> } } }).error.details.issues?.[0]?.path;
}

test('neither text nor assetSourceId is 400 naming body.text; an unknown asset 400 naming body.assetSourceId', async () => {
  const w = await world(h);
  const empty = await send(h, w.key, `/conversations/${w.conversationId}/messages`, {});
  assert.equal(empty.statusCode, 400, empty.body);
  assert.equal(issuePath(empty), 'body.text');
  const unknown = await send(h, w.key, `/conversations/${w.conversationId}/messages`, { assetSourceId: 'src_nope' });
  assert.equal(unknown.statusCode, 400, unknown.body);
  assert.equal(issuePath(unknown), 'body.assetSourceId');
});

test('a caption counts code points: 1024 emoji are accepted, 1025 are 400; text alone keeps its 4096 limit', async () => {
  const w = await world(h);
  const image = await asset(h, w.tenantId);
  const at = await send(h, w.key, `/conversations/${w.conversationId}/messages`, { text: '😀'.repeat(1024), assetSourceId: image.sourceId });
  assert.equal(at.statusCode, 202, at.body.slice(0, 300));
  const over = await send(h, w.key, `/conversations/${w.conversationId}/messages`, { text: '😀'.repeat(1025), assetSourceId: image.sourceId });
  assert.equal(over.statusCode, 400, over.body.slice(0, 300));
  assert.equal(issuePath(over), 'body.text');
  assert.equal((await send(h, w.key, `/conversations/${w.conversationId}/messages`, { text: '😀'.repeat(4096) })).statusCode, 202);
  assert.equal((await send(h, w.key, `/conversations/${w.conversationId}/messages`, { text: '😀'.repeat(4097) })).statusCode, 400);
});

test('ineligible assets are 409 asset_not_eligible: blocked by validation, inactive, in an inactive folder; nothing written', async () => {
  const w = await world(h);
  const writer = (await h.app.admin<{ key: string }>('POST', `/tenants/${w.tenantId}/api-keys`, { name: 'knowledge', scopes: ['knowledge:write'] })).key;
  const blocked = await asset(h, w.tenantId, { bytes: ELF, contentType: 'application/pdf', filename: 'rules.pdf' });
  assert.notEqual(blocked.validationStatus, 'ready');
  const inactive = await asset(h, w.tenantId);
  assert.equal((await h.app.api(writer, 'PATCH', `/knowledge/sources/${inactive.sourceId}`, { active: false })).statusCode, 200);
  const folder = await h.app.admin<{ folderId: string }>('POST', `/tenants/${w.tenantId}/knowledge/asset-folders`, { title: 'Maps' });
  const inFolder = await asset(h, w.tenantId, { folderId: folder.folderId });
  assert.equal(inFolder.validationStatus, 'ready');
  assert.equal((await send(h, w.key, `/conversations/${w.conversationId}/messages`, { assetSourceId: inFolder.sourceId })).statusCode, 202, 'attachable while its folder is active');
  assert.equal((await h.app.api(writer, 'PATCH', `/knowledge/asset-folders/${folder.folderId}`, { active: false })).statusCode, 200);

  const db = h.app.runtime.services.db;
  const count = async () => (await db.query(`SELECT 1 FROM messages WHERE conversation_id = $1 AND direction = 'outbound'`, [w.conversationId])).length;
  const before = await count();
  for (const sourceId of [blocked.sourceId, inactive.sourceId, inFolder.sourceId]) {
    const res = await send(h, w.key, `/conversations/${w.conversationId}/messages`, { text: 'map', assetSourceId: sourceId });
    assert.equal(res.statusCode, 409, res.body);
    assert.equal(reason(res), 'asset_not_eligible');
  }
  assert.equal(await count(), before);
  // Only the one accepted reply holds media.
  const copies = await db.query<{ id: string }>(`SELECT id FROM messages WHERE conversation_id = $1 AND direction = 'outbound' AND media IS NOT NULL`, [w.conversationId]);
  assert.equal(copies.length, 1);
});

test('replyToMessageId must be a message of the conversation: 400 naming it otherwise (another conversation\'s too)', async () => {
  const w = await world(h);
  const other = await world(h);
  for (const replyToMessageId of ['msg_missing', other.inboundId]) {
    const res = await send(h, w.key, `/conversations/${w.conversationId}/messages`, { text: 'ok', replyToMessageId });
    assert.equal(res.statusCode, 400, res.body);
    assert.equal(issuePath(res), 'body.replyToMessageId');
    assert.equal(reason(res), 'reply_to_not_found');
  }
});
