import { test } from 'node:test';
import assert from 'node:assert/strict';
import pino from 'pino';
import { systemClock } from '../../src/clock.js';
import { ConfigError, loadConfig } from '../../src/config.js';
import type { Db } from '../../src/db/driver.js';
import { notifyChannelName } from '../../src/db/tx-handle.js';
import { MAX_TASK_NAME, jobsChannel } from '../../src/jobs/queue.js';
import { JobRunner } from '../../src/jobs/runner.js';

// Wake-up channels are `<schema>.jobs.<task>`, and PostgreSQL refuses a pg_notify channel of 64 bytes or more: the
// schema is held to 30 characters and a task name to MAX_TASK_NAME, so the longest pair still fits.
test('the longest schema and the longest task name make a channel name PostgreSQL accepts', () => {
  const schema = 'a'.repeat(30);
  assert.equal(loadConfig({ DATABASE_SCHEMA: schema }, []).databaseSchema, schema);
  assert.throws(() => loadConfig({ DATABASE_SCHEMA: `${schema}b` }, []), (error: Error) => error instanceof ConfigError && /30 characters/.test(error.message));
  assert.ok(Buffer.byteLength(notifyChannelName(schema, jobsChannel('t'.repeat(MAX_TASK_NAME)))) <= 63);
});

test('a task whose name would not fit is refused when registered', () => {
  // Registration touches no database.
  const runner = new JobRunner({} as Db, systemClock, pino({ level: 'silent' }), { pollIntervalMs: 1000 });
  assert.doesNotThrow(() => runner.register('t'.repeat(MAX_TASK_NAME), async () => undefined));
  assert.throws(() => runner.register('t'.repeat(MAX_TASK_NAME + 1), async () => undefined), /longer than 27 bytes/);
});
