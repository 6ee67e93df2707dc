import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { test } from 'node:test';
import pino from 'pino';
import { loadConfig } from '../../src/config.js';
import { lazyChild } from '../../src/util/lazy-logger.js';
import { createLogger, createRuntime } from '../../src/runtime.js';
import { ADMIN_TOKEN } from '../helpers/app.js';
import { isolatedDatabase } from '../helpers/db.js';

function capture(level: string) {
  const lines: Array<Record<string, unknown>> = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString('utf8').split('\n')) if (line) lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  return { logger: pino({ level }, stream), lines, raw: () => lines.map((line) => JSON.stringify(line)).join('\n') };
}

const withoutTime = (line: Record<string, unknown>) => ({ ...line, time: 0 });

test('a lazy child logs exactly what a pino child logs, and nothing below the level', () => {
  const eager = capture('info');
  const lazy = capture('info');
  eager.logger.child({ reqId: 'req_1' }).child({ tenantId: 'ten_1' }).warn({ code: 'X' }, 'careful');
  lazyChild(lazy.logger, { reqId: 'req_1' }).child({ tenantId: 'ten_1' }).warn({ code: 'X' }, 'careful');
  assert.deepEqual(lazy.lines.map(withoutTime), eager.lines.map(withoutTime));
  assert.equal(lazy.lines[0].reqId, 'req_1');
  assert.equal(lazy.lines[0].tenantId, 'ten_1');

  const child = lazyChild(lazy.logger, { reqId: 'req_2' });
  child.debug('hidden');
  child.trace('hidden');
  assert.equal(lazy.lines.length, 1);
  assert.equal(child.level, 'info');
  child.level = 'debug';
  child.debug('shown');
  assert.equal(lazy.lines.length, 2);
  assert.equal(lazy.lines[1].reqId, 'req_2');
});

test('request logs carry the request id, tenant and key id, and never the bearer key', async () => {
  const database = await isolatedDatabase();
  const { logger, lines, raw } = capture('info');
  const config = loadConfig({ ADMIN_TOKEN, ...database.env }, []);
  const runtime = await createRuntime(config, { logger });
  try {
    const tenant = await runtime.app.inject({ method: 'POST', url: '/admin/v1/tenants', headers: { authorization: `Bearer ${ADMIN_TOKEN}` }, payload: { name: 'Log Hotel' } });
    const { tenantId } = tenant.json() as { tenantId: string };
    const created = await runtime.app.inject({
      method: 'POST',
      url: `/admin/v1/tenants/${tenantId}/api-keys`,
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
      payload: { name: 'logs', scopes: ['conversations:read'] },
    });
    const { key, apiKeyId } = created.json() as { key: string; apiKeyId: string };

    const denied = await runtime.app.inject({ method: 'GET', url: '/m2m/v1/webhooks', headers: { authorization: `Bearer ${key}`, 'x-request-id': 'req_log_test_1' } });
    assert.equal(denied.statusCode, 403);
    const line = lines.find((entry) => entry.reqId === 'req_log_test_1' && entry.code === 'M2M_AUTH_INSUFFICIENT_SCOPE');
    assert.ok(line, `no log line for the denied request in:\n${raw()}`);
    assert.equal(line.tenantId, tenantId);
    assert.equal(line.apiKeyId, apiKeyId);
    assert.equal(line.status, 403);
    assert.ok(!raw().includes(key), 'the bearer key appears in the logs');
    assert.ok(!raw().includes(ADMIN_TOKEN), 'the admin token appears in the logs');
  } finally {
    await runtime.close(2_000);
    await database.drop();
  }
});

test('logs are readable lines in a terminal and JSON lines anywhere else, hiding the same fields', () => {
  const collect = (isTTY: boolean) => {
    let text = '';
    const output = Object.assign(
      new Writable({
        write(chunk: Buffer, _encoding, done) {
          text += chunk.toString('utf8');
          done();
        },
      }),
      { isTTY },
    );
    createLogger('info', output).info({ reqId: 'req_pretty', secret: 'whsec_hidden', req: { headers: { authorization: 'Bearer m2m_live_hidden' } } }, 'request completed');
    return text;
  };
  const json = JSON.parse(collect(false)) as Record<string, unknown>;
  assert.equal(json.msg, 'request completed');
  assert.equal(json.reqId, 'req_pretty');
  assert.equal(json.secret, '[redacted]');

  const terminal = collect(true);
  assert.throws(() => JSON.parse(terminal), 'not JSON in a terminal');
  assert.match(terminal, /INFO/);
  assert.match(terminal, /request completed/);
  assert.match(terminal, /req_pretty/);
  assert.doesNotMatch(terminal, /whsec_hidden|m2m_live_hidden/);
});
