/** The latency phase's load: events emitted at a fixed rate through the admin route. */
import { Pool } from 'undici';
import { sleep } from './lib.js';
import { ADMIN_TOKEN, emitBody } from './procs.js';

/** Emits `rate` events/s for `seconds` through the admin route over keep-alive connections; bounded in count and time. */
export async function pacedEmit(base: string, tenantId: string, rate: number, seconds: number) {
  const pool = new Pool(base, { connections: 32, pipelining: 1, keepAliveTimeout: 30_000, headersTimeout: 10_000, bodyTimeout: 10_000 });
  const total = Math.round(rate * seconds);
  const records: Array<{ eventId: string; sentAt: number; doneAt: number }> = [];
  let failures = 0;
  const failureReasons: Record<string, number> = {};
  const fail = (reason: string) => {
    failures += 1;
    failureReasons[reason] = (failureReasons[reason] ?? 0) + 1;
  };
  let attempted = 0;
  let inFlight = 0;
  const pending = new Set<Promise<void>>();
  const emitOne = async (seq: number) => {
    const sentAt = Date.now();
    try {
      const response = await pool.request({
        method: 'POST',
        path: `/admin/v1/tenants/${tenantId}/webhook-events`,
        headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify(emitBody(seq)),
      });
      const text = await response.body.text();
      const doneAt = Date.now();
      if (response.statusCode !== 201) fail(`HTTP ${response.statusCode}`);
      else records.push({ eventId: (JSON.parse(text) as { eventId: string }).eventId, sentAt, doneAt });
    } catch (error) {
      const code = (error as { code?: string }).code ?? (error instanceof Error ? error.name : 'error');
      fail(code === 'UND_ERR_DESTROYED' ? 'no answer when the loop ended' : code);
    }
  };
  const start = Date.now();
  const hardStop = start + seconds * 1000 + 2_000;
  try {
    while (attempted < total && Date.now() < hardStop) {
      const due = Math.min(total, Math.floor(((Date.now() - start) / 1000) * rate) + 1);
      while (attempted < due && inFlight < 512) {
        inFlight += 1;
        const p = emitOne(attempted).finally(() => {
          inFlight -= 1;
          pending.delete(p);
        });
        pending.add(p);
        attempted += 1;
      }
      await sleep(2);
    }
    await Promise.race([Promise.allSettled([...pending]), sleep(15_000)]);
  } finally {
    await pool.destroy();
  }
  return { records, failures, failureReasons, attempted, start };
}
