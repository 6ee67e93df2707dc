import { createHmac, randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A simulated WhatsApp Business number for `m2m dev`: a small stand-in for Meta's Graph API on 127.0.0.1 that the
 * server is pointed at (META_GRAPH_BASE_URL), and the signed callbacks Meta would post to the server. It answers
 * sends like the Cloud API (a `wamid` per message), moves each sent message to delivered and read through the real
 * callback route, serves the demo template as approved, and prints what the business sent, so a newcomer sees a
 * guest's message arrive and the answer go out without a Meta account.
 */

/** The simulated number's ids, as Meta would give them (digits). */
export const DEV_WHATSAPP = { phoneNumberId: '109876543210001', wabaId: '209876543210001', displayPhoneNumber: '34910000000' } as const;

/** Everything another process needs to post callbacks as Meta would (`m2m trigger`). */
export interface DevWhatsApp {
  appSecret: string;
  phoneNumberId: string;
  wabaId: string;
  displayPhoneNumber: string;
}

const TEMPLATES = [
  { name: 'guest_welcome', language: 'en_US', status: 'APPROVED', category: 'UTILITY', id: '900000000000001' },
  { name: 'guest_welcome', language: 'es_MX', status: 'APPROVED', category: 'UTILITY', id: '900000000000002' },
];

/** `X-Hub-Signature-256` of a raw body, as Meta signs its callbacks. */
export function metaSignature(appSecret: string, body: string): string {
  return `sha256=${createHmac('sha256', appSecret).update(body).digest('hex')}`;
}

/** Posts a callback body to the server's Meta route, signed; throws unless the server stored it (200). */
export async function postCallback(callbackUrl: string, appSecret: string, payload: unknown): Promise<void> {
  const body = JSON.stringify(payload);
  const response = await fetch(callbackUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-hub-signature-256': metaSignature(appSecret, body) },
    body,
    signal: AbortSignal.timeout(10_000),
  });
  if (!response.ok) throw new Error(`the server answered ${response.status} to a signed Meta callback: ${(await response.text()).slice(0, 300)}`);
}

/** A `whatsapp_business_account` callback with one `value` (Meta's documented envelope). */
function envelope(number: DevWhatsApp, value: Record<string, unknown>) {
  return {
    object: 'whatsapp_business_account',
    entry: [
      {
        id: number.wabaId,
        changes: [
          {
            field: 'messages',
            value: { messaging_product: 'whatsapp', metadata: { display_phone_number: number.displayPhoneNumber, phone_number_id: number.phoneNumberId }, ...value },
          },
        ],
      },
    ],
  };
}

const epochSeconds = () => String(Math.floor(Date.now() / 1000));
const wamid = () => `wamid.${randomBytes(24).toString('base64url')}`;

/** A guest's text message as Meta delivers it (`messages[]` with the sender's profile in `contacts[]`). */
export function inboundText(number: DevWhatsApp, guest: { name: string; phone: string }, text: string) {
  const waId = guest.phone.replace(/^\+/, '');
  return envelope(number, {
    contacts: [{ profile: { name: guest.name }, wa_id: waId }],
    messages: [{ from: waId, id: wamid(), timestamp: epochSeconds(), type: 'text', text: { body: text } }],
  });
}

function statusUpdate(number: DevWhatsApp, messageId: string, recipient: string, status: 'delivered' | 'read') {
  return envelope(number, { statuses: [{ id: messageId, status, timestamp: epochSeconds(), recipient_id: recipient }] });
}

interface SendBody {
  messaging_product?: string;
  to?: string;
  type?: string;
  text?: { body?: string };
  template?: { name?: string; language?: { code?: string } };
  status?: string;
}

function graphError(res: ServerResponse, status: number, message: string, code = 100): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ error: { message, type: 'OAuthException', code, fbtrace_id: randomBytes(8).toString('hex') } }));
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > 1_000_000) throw new Error('request body too large');
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}

export interface DevGraph {
  baseUrl: string;
  number: DevWhatsApp;
  close(): Promise<void>;
}

/**
 * Starts the simulated number. `callbackUrl` is the server's `/providers/meta/webhook`; `say` prints one line for
 * the person running `m2m dev` (what the business sent).
 */
export async function startDevGraph(options: { callbackUrl: () => string; say: (line: string) => void }): Promise<DevGraph> {
  const number: DevWhatsApp = { appSecret: randomBytes(32).toString('hex'), ...DEV_WHATSAPP };
  const pending = new Set<Promise<void>>();
  const later = (work: () => Promise<void>) => {
    const running = work()
      .catch((error: unknown) => options.say(`(simulated WhatsApp) a status callback failed: ${error instanceof Error ? error.message : String(error)}`))
      .finally(() => pending.delete(running));
    pending.add(running);
  };

  const server: Server = createServer((req, res) => {
    void (async () => {
      const url = new URL(req.url ?? '/', 'http://graph.local');
      const parts = url.pathname.split('/').filter(Boolean); // [version, id, edge]
      if (!/^v\d+\.\d+$/.test(parts[0] ?? '')) return graphError(res, 400, 'Unknown path components: the API version is missing', 2500);
      if (!/^Bearer \S+$/.test(req.headers.authorization ?? '')) return graphError(res, 401, 'Invalid OAuth access token.', 190);
      const [, id, edge] = parts;
      if (req.method === 'GET' && id === number.wabaId && edge === 'message_templates') {
        res.writeHead(200, { 'content-type': 'application/json' });
        return res.end(JSON.stringify({ data: TEMPLATES, paging: { cursors: { before: 'MAA', after: 'MQZD' } } }));
      }
      if (req.method === 'POST' && id === number.phoneNumberId && edge === 'messages') {
        let body: SendBody;
        try {
          body = JSON.parse(await readBody(req)) as SendBody;
        } catch {
          return graphError(res, 400, 'Invalid JSON');
        }
        if (body.messaging_product !== 'whatsapp') return graphError(res, 400, '(#100) The parameter messaging_product is required.');
        if (body.status === 'read') {
          res.writeHead(200, { 'content-type': 'application/json' });
          return res.end(JSON.stringify({ success: true }));
        }
        if (!body.to) return graphError(res, 400, '(#100) The parameter to is required.');
        const messageId = wamid();
        const recipient = body.to.replace(/^\+/, '');
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ messaging_product: 'whatsapp', contacts: [{ input: body.to, wa_id: recipient }], messages: [{ id: messageId }] }));
        const what = body.type === 'text' ? JSON.stringify(body.text?.body ?? '') : body.type === 'template' ? `template ${body.template?.name ?? '?'} (${body.template?.language?.code ?? '?'})` : body.type ?? 'message';
        options.say(`(simulated WhatsApp) the business sent +${recipient}: ${what}`);
        // The guest's phone receives it, then the guest reads it: Meta reports both as status callbacks.
        later(async () => {
          await postCallback(options.callbackUrl(), number.appSecret, statusUpdate(number, messageId, recipient, 'delivered'));
          await postCallback(options.callbackUrl(), number.appSecret, statusUpdate(number, messageId, recipient, 'read'));
        });
        return;
      }
      return graphError(res, 400, `Unsupported ${req.method} request. Object with ID '${id ?? ''}' does not exist`, 100);
    })().catch(() => {
      if (!res.headersSent) graphError(res, 500, 'An unexpected error has occurred.', 2);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    number,
    async close() {
      await Promise.allSettled([...pending]);
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
