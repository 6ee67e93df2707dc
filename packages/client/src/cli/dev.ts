import { randomBytes } from 'node:crypto';
import { join, relative, resolve } from 'node:path';
import { M2MClient } from '../index.js';
import { adminClient, type AdminClient } from './admin.js';
import type { Command } from './command.js';
import { adminBaseUrl, DEFAULT_BASE_URL, devStateFile, readJson, writeJson, type DevState } from './config.js';
import { dayFromNow, GUESTS, KNOWLEDGE } from './demo.js';
import { inboundText, postCallback, startDevGraph, type DevGraph } from './dev-graph.js';
import { serverRoot, startServer, waitUntilReady } from './dev-server.js';
import { UsageError } from './errors.js';
import { listenFile, listenSecret } from './listen-state.js';
import { emit } from './output.js';

interface Demo extends DevState {
  propertyId: string;
  conversations: number;
  reservations: number;
  knowledgeSources: number;
}

/** Every scope an admin may grant, read from the admin API's own OpenAPI document (createApiKey's body). */
async function allScopes(admin: AdminClient): Promise<string[]> {
  const document = await admin.call<unknown>('GET', '/openapi.json');
  const found = new Set<string>();
  const visit = (node: unknown, key: string | undefined): void => {
    if (Array.isArray(node)) node.forEach((item) => visit(item, key));
    else if (node !== null && typeof node === 'object') {
      for (const [name, value] of Object.entries(node)) {
        if (name === 'enum' && key === 'scopes' && Array.isArray(value)) value.forEach((scope) => typeof scope === 'string' && found.add(scope));
        visit(value, name === 'items' ? key : name);
      }
    }
  };
  visit(document, undefined);
  if (found.size === 0) throw new Error('the admin OpenAPI document names no scopes');
  return [...found];
}

/** The demo tenant: a property, a WhatsApp channel with a ready template, three conversations, two reservations, knowledge. */
async function seed(admin: AdminClient, baseUrl: string, adminToken: string, graph: DevGraph, callbackUrl: string): Promise<Demo> {
  const { tenantId } = await admin.call<{ tenantId: string }>('POST', '/tenants', { name: 'Hotel Sol (demo)', timezone: 'Europe/Madrid' });
  const at = `/tenants/${tenantId}`;
  const { propertyId } = await admin.call<{ propertyId: string }>('POST', `${at}/properties`, { name: 'Hotel Sol Madrid' });
  // A WhatsApp Cloud API channel on the simulated number: sends go to it, its templates are synced from it.
  const { channelId } = await admin.call<{ channelId: string }>('POST', `${at}/channels`, {
    kind: 'whatsapp',
    name: 'WhatsApp front desk',
    phoneNumber: `+${graph.number.displayPhoneNumber}`,
    provider: 'whatsapp_cloud',
    connection: { phoneNumberId: graph.number.phoneNumberId, wabaId: graph.number.wabaId, accessToken: 'dev-simulated-token' },
  });
  const { key } = await admin.call<{ key: string }>('POST', `${at}/api-keys`, { name: 'm2m dev (every scope)', scopes: await allScopes(admin) });
  // The guests write in as Meta would deliver their messages: signed callbacks, processed by the workers.
  for (const guest of GUESTS) await postCallback(callbackUrl, graph.number.appSecret, inboundText(graph.number, guest, guest.text));
  const m2m = new M2MClient({ apiKey: key, baseUrl });
  await until('the guests\' conversations', async () => (await m2m.conversations.list({ limit: GUESTS.length })).conversations.length === GUESTS.length);
  await until('the template guest_welcome synced as ready', async () =>
    (await m2m.channels.templates({ channelId })).templates.some((t) => t.templateName === 'guest_welcome' && t.locales.every((l) => l.ready)),
  );
  const { integrationId } = await admin.call<{ integrationId: string }>('POST', `${at}/integrations`, { provider: 'pms', name: 'Demo PMS' });
  const stays = GUESTS.slice(0, 2).map((guest, index) => ({ id: `R-100${index + 1}`, guest, checkIn: dayFromNow(index + 1) }));
  for (const stay of stays) {
    await admin.call('PUT', `${at}/integrations/${integrationId}/reservations/${stay.id}`, {
      status: 'confirmed',
      propertyId,
      checkInDate: stay.checkIn,
      checkOutDate: dayFromNow(4),
      bookedAt: new Date(Date.now() - 7 * 86_400_000).toISOString(),
      guestFullName: stay.guest.name,
      guestPhone: stay.guest.phone,
    });
  }
  // Knowledge goes in through the public API, as an integration would add it.
  for (const source of KNOWLEDGE) await m2m.knowledge.sources.create({ sourceType: 'text', title: source.title, text: source.text });
  return {
    baseUrl,
    adminToken,
    tenantId,
    apiKey: key,
    channelId,
    propertyId,
    conversations: GUESTS.length,
    reservations: stays.length,
    knowledgeSources: KNOWLEDGE.length,
  };
}

/** Waits for the workers (callback processing, template sync); gives up after a minute. */
async function until(what: string, done: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (!(await done())) {
    if (Date.now() > deadline) throw new Error(`gave up waiting for ${what}`);
    await new Promise((resolveWait) => setTimeout(resolveWait, 100));
  }
}

/** A tenant from an earlier `m2m dev` on the same data directory still works: keep it rather than pile up demo tenants. */
async function earlierDemo(baseUrl: string, dataDir: string): Promise<DevState | undefined> {
  if (dataDir.startsWith('memory://')) return undefined;
  const saved = await readJson<DevState & { dataDir?: string }>(devStateFile());
  if (!saved || saved.baseUrl !== baseUrl || saved.dataDir !== dataDir) return undefined;
  try {
    await new M2MClient({ apiKey: saved.apiKey, baseUrl, maxRetries: 0 }).events.list({ limit: 1 });
    return saved;
  } catch {
    return undefined;
  }
}

/** The shell lines that give another terminal this server's key (and its URL when not the default one). */
function exportLines(state: DevState): string[] {
  const lines = [`export M2M_API_KEY=${state.apiKey}`];
  if (state.baseUrl !== DEFAULT_BASE_URL) lines.push(`export M2M_BASE_URL=${state.baseUrl}`);
  return lines;
}

/**
 * What to run next, in order, each ready to paste: the receiver starts before the listener forwards to it and
 * before anything is triggered, so the first event has somewhere to go.
 */
function nextSteps(state: DevState, receiver: { port: number; secret: string }): string[] {
  // The other commands find this server's key through .m2m/dev.json when M2M_BASE_URL names it (the default does for 8080).
  const configured = (process.env.M2M_BASE_URL || DEFAULT_BASE_URL).replace(/\/+$/, '');
  const m2m = configured === state.baseUrl ? 'npx m2m' : `M2M_BASE_URL=${state.baseUrl} npx m2m`;
  const example = relative(process.cwd(), join(serverRoot(), 'packages', 'client', 'examples', 'receiver.ts'));
  return [
    `curl -s ${state.baseUrl}/conversations -H 'Authorization: Bearer ${state.apiKey}'`,
    `WEBHOOK_SECRET=${receiver.secret} PORT=${receiver.port} node --import tsx ${example}`,
    `${m2m} listen --forward-to http://127.0.0.1:${receiver.port}/webhooks`,
    `${m2m} trigger message.created`,
  ];
}

/** What each of the next steps is for, printed above it. */
const stepNotes = (listenSecrets: string) => [
  'Your first call:',
  `A webhook receiver (it checks the signatures \`m2m listen\` makes, with the secret kept in ${listenSecrets}):`,
  'Events to the receiver (one it does not answer is tried again until it does):',
  'A guest writes in:',
];

export const devCommand: Command = {
  words: ['dev'],
  usage: '[--port 8080] [--data-dir ./data] [--receiver-port 3000]',
  summary:
    'Start the API and its workers on the embedded database with a generated admin token and a simulated WhatsApp number (a ' +
    'local stand-in for Meta\'s Graph API), create a demo tenant (a property, a WhatsApp channel with a ready template, ' +
    'conversations, reservations, knowledge) and print a key with every scope and what to ' +
    'run next. The key and token are kept in .m2m/dev.json, so the other commands work from this folder without exports.',
  options: {
    port: { type: 'string', description: 'port on 127.0.0.1 (default: the port of M2M_BASE_URL, 8080)' },
    'data-dir': { type: 'string', description: 'embedded database directory (default ./data; memory:// keeps nothing)' },
    'receiver-port': { type: 'string', description: 'port of the webhook receiver in the printed next steps (default 3000)' },
  },
  async run({ values, json }) {
    const port = values.integer('port') ?? Number(new URL(process.env.M2M_BASE_URL || DEFAULT_BASE_URL).port || 80);
    if (port < 1 || port > 65535) throw new UsageError('--port must be 1..65535');
    const receiverPort = values.integer('receiver-port') ?? 3000;
    if (receiverPort < 1 || receiverPort > 65535) throw new UsageError('--receiver-port must be 1..65535');
    const rawDataDir = values.string('data-dir') ?? 'data';
    const dataDir = rawDataDir.startsWith('memory://') ? rawDataDir : resolve(rawDataDir);
    const origin = `http://127.0.0.1:${port}`;
    const baseUrl = `${origin}/m2m/v1`;
    const adminToken = randomBytes(24).toString('base64url');
    const started = performance.now();
    const callbackUrl = `${origin}/providers/meta/webhook`;
    const graph = await startDevGraph({ callbackUrl: () => callbackUrl, say: (line) => process.stderr.write(`${line}\n`) });
    const server = startServer({
      port,
      adminToken,
      dataDir,
      env: { META_GRAPH_BASE_URL: graph.baseUrl, META_APP_SECRET: graph.number.appSecret, META_VERIFY_TOKEN: randomBytes(16).toString('hex') },
    });
    const stop = () => server.child.kill('SIGTERM');
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
    try {
      await waitUntilReady(server, origin);
      const admin = adminClient({ baseUrl, adminToken });
      const earlier = await earlierDemo(baseUrl, dataDir);
      const whatsapp = { ...graph.number, callbackUrl };
      const state = { ...(earlier ? { ...earlier, adminToken } : await seed(admin, baseUrl, adminToken, graph, callbackUrl)), whatsapp };
      await writeJson(devStateFile(), { ...state, dataDir });
      const seconds = ((performance.now() - started) / 1000).toFixed(1);
      const webhookSecret = await listenSecret();
      const next = nextSteps(state, { port: receiverPort, secret: webhookSecret });
      const exports = exportLines(state);
      const notes = stepNotes(listenFile());
      emit(json, { ...state, adminBaseUrl: adminBaseUrl(baseUrl), dataDir, reused: earlier !== undefined, webhookSecret, exports, next }, () =>
        [
          `M2M API ready in ${seconds} s at ${baseUrl} (embedded database: ${dataDir}; admin API: ${adminBaseUrl(baseUrl)})`,
          earlier
            ? `Demo tenant ${state.tenantId} from the last run, kept in ${dataDir}.`
            : `Demo tenant ${state.tenantId} "Hotel Sol (demo)": a property, a WhatsApp channel on a simulated number ` +
              `(+${graph.number.displayPhoneNumber}: what the business sends is printed here) with the template guest_welcome ready, ` +
              `${GUESTS.length} conversations, 2 reservations, ${KNOWLEDGE.length} knowledge sources.`,
          '',
          'Your key, with every scope (paste this where you call the API or run the examples):',
          '',
          ...exports.map((line) => `  ${line}`),
          '',
          `Admin token: ${adminToken}. Both are saved in ${devStateFile()}: m2m commands run from this folder use them without exports.`,
          '',
          'Next, each in its own terminal, from this folder:',
          ...next.flatMap((command, index) => [`  ${index + 1}. ${notes[index]}`, `     ${command}`]),
          '',
          'Ctrl-C stops the server.',
        ].join('\n'),
      );
    } catch (error) {
      stop();
      await server.exited;
      await graph.close();
      throw error;
    }
    const code = await server.exited;
    await graph.close();
    process.off('SIGINT', stop);
    process.off('SIGTERM', stop);
    return code === 0 || server.child.signalCode === 'SIGTERM' ? 0 : code;
  },
};
