import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createHash, randomBytes } from 'node:crypto';
import { Type, type TSchema } from 'typebox';
import { lazyCheck } from '../../src/channels/providers/meta/payload-schemas.js';

export * from './meta-callbacks.js';

/*
 * A fake Graph API on 127.0.0.1 (DESIGN.md habit 21). It checks each request against the shapes Meta documents and
 * refuses what Meta would refuse with Meta's error envelope (400 code 100 for bad parameters, 401 code 190 for a
 * bad token); it records every request, answers as Meta does (wamid ids, media URLs, template pages) and can be
 * told to fail or to answer slowly. Point META_GRAPH_BASE_URL at `baseUrl`.
 */

export interface RecordedRequest {
  method: string;
  path: string;
  query: Record<string, string>;
  headers: http.IncomingHttpHeaders;
  json?: unknown;
  form?: Record<string, string | { filename: string; type: string; size: number }>;
  /** What the fake answered. */
  status: number;
  /** When it arrived (epoch ms). */
  at: number;
}

export interface Injected {
  status: number;
  /** Meta error code of the envelope (e.g. 130429, 131047, 190); absent with `rawBody`. */
  code?: number;
  subcode?: number;
  message?: string;
  /** Answer these bytes instead of an envelope (e.g. a 200 with an unusable body). */
  rawBody?: string;
  /** Only for calls to this edge (`messages`, `media`); any call when absent. */
  edge?: string;
}

export interface FakeTemplate {
  name: string;
  language: string;
  status: string;
  category: string;
}

interface Media {
  bytes: Buffer;
  mimeType: string;
  /** The token allowed to fetch it. */
  token: string;
}

const Strict = { additionalProperties: false } as const;
const Digits = Type.String({ pattern: '^[0-9]{6,15}$' });
const MediaRef = (extra: Record<string, TSchema>) =>
  Type.Union([
    Type.Object({ id: Type.String({ minLength: 1 }), ...extra }, Strict),
    Type.Object({ link: Type.String({ format: 'uri', minLength: 1 }), ...extra }, Strict),
  ]);
const Caption = Type.Optional(Type.String({ minLength: 1, maxLength: 1024 }));
const waBase = {
  messaging_product: Type.Literal('whatsapp'),
  recipient_type: Type.Optional(Type.Literal('individual')),
  to: Digits,
  context: Type.Optional(Type.Object({ message_id: Type.String({ minLength: 1 }) }, Strict)),
  biz_opaque_callback_data: Type.Optional(Type.String({ maxLength: 512 })),
};

/** The WhatsApp message bodies Meta documents for POST /{phone-number-id}/messages (the kinds this service sends). */
const WhatsAppSend = Type.Union([
  Type.Object({ ...waBase, type: Type.Literal('text'), text: Type.Object({ body: Type.String({ minLength: 1, maxLength: 4096 }), preview_url: Type.Optional(Type.Boolean()) }, Strict) }, Strict),
  Type.Object(
    {
      ...waBase,
      type: Type.Literal('template'),
      template: Type.Object(
        {
          name: Type.String({ minLength: 1, maxLength: 512 }),
          language: Type.Object({ code: Type.String({ minLength: 2 }), policy: Type.Optional(Type.Literal('deterministic')) }, Strict),
          components: Type.Optional(
            Type.Array(
              Type.Object(
                { type: Type.Literal('body'), parameters: Type.Array(Type.Object({ type: Type.Literal('text'), text: Type.String({ minLength: 1, maxLength: 32768 }) }, Strict), { minItems: 1 }) },
                Strict,
              ),
            ),
          ),
        },
        Strict,
      ),
    },
    Strict,
  ),
  Type.Object({ ...waBase, type: Type.Literal('image'), image: MediaRef({ caption: Caption }) }, Strict),
  Type.Object({ ...waBase, type: Type.Literal('video'), video: MediaRef({ caption: Caption }) }, Strict),
  Type.Object({ ...waBase, type: Type.Literal('audio'), audio: MediaRef({}) }, Strict),
  Type.Object({ ...waBase, type: Type.Literal('document'), document: MediaRef({ caption: Caption, filename: Type.Optional(Type.String({ minLength: 1, maxLength: 240 })) }) }, Strict),
  Type.Object({ ...waBase, type: Type.Literal('reaction'), reaction: Type.Object({ message_id: Type.String({ minLength: 1 }), emoji: Type.String() }, Strict) }, Strict),
]);
const WhatsAppRead = Type.Object(
  {
    messaging_product: Type.Literal('whatsapp'),
    status: Type.Literal('read'),
    message_id: Type.String({ minLength: 1 }),
    typing_indicator: Type.Optional(Type.Object({ type: Type.Literal('text') }, Strict)),
  },
  Strict,
);
const isWhatsAppSend = lazyCheck(WhatsAppSend);
const isWhatsAppRead = lazyCheck(WhatsAppRead);

const Recipient = Type.Object({ id: Type.String({ minLength: 1 }) }, Strict);
/** The Send API bodies of POST /{page-id}/messages and /{ig-account-id}/messages. */
const SendApi = Type.Union([
  Type.Object({ recipient: Recipient, messaging_type: Type.Literal('RESPONSE'), message: Type.Object({ text: Type.String({ minLength: 1, maxLength: 2000 }) }, Strict) }, Strict),
  Type.Object(
    {
      recipient: Recipient,
      messaging_type: Type.Literal('RESPONSE'),
      message: Type.Object(
        {
          attachment: Type.Object(
            { type: Type.Union([Type.Literal('image'), Type.Literal('audio'), Type.Literal('video'), Type.Literal('file')]), payload: Type.Object({ attachment_id: Type.String({ minLength: 1 }) }, Strict) },
            Strict,
          ),
        },
        Strict,
      ),
    },
    Strict,
  ),
  Type.Object({ recipient: Recipient, sender_action: Type.Union([Type.Literal('mark_seen'), Type.Literal('typing_on'), Type.Literal('typing_off')]) }, Strict),
  Type.Object({ recipient: Recipient, sender_action: Type.Literal('react'), payload: Type.Object({ message_id: Type.String({ minLength: 1 }), reaction: Type.String({ minLength: 1 }) }, Strict) }, Strict),
  Type.Object({ recipient: Recipient, sender_action: Type.Literal('unreact'), payload: Type.Object({ message_id: Type.String({ minLength: 1 }) }, Strict) }, Strict),
]);
const isSendApi = lazyCheck(SendApi);
const AttachmentMessage = Type.Object(
  {
    attachment: Type.Object(
      {
        type: Type.Union([Type.Literal('image'), Type.Literal('audio'), Type.Literal('video'), Type.Literal('file')]),
        payload: Type.Object({ is_reusable: Type.Optional(Type.Boolean()) }, Strict),
      },
      Strict,
    ),
  },
  Strict,
);
const isAttachmentMessage = lazyCheck(AttachmentMessage);

function metaError(status: number, code: number, message: string, subcode?: number) {
  return {
    status,
    body: { error: { message, type: code === 190 ? 'OAuthException' : 'OAuthException', code, ...(subcode !== undefined ? { error_subcode: subcode } : {}), fbtrace_id: `A${randomBytes(8).toString('hex')}` } },
  };
}

const invalidParameter = (detail: string) => metaError(400, 100, `(#100) Invalid parameter: ${detail}`);

function wamid(): string {
  return `wamid.${randomBytes(24).toString('base64url')}`;
}

export interface FakeGraphOptions {
  /** Graph API version the paths must carry (any `vN.M` when absent). */
  apiVersion?: string;
}

/** Starts the fake Graph API; register the accounts a test uses before calling it. */
export async function startFakeGraph(options: FakeGraphOptions = {}) {
  const whatsapp = new Map<string, { wabaId: string; token: string }>();
  const wabas = new Map<string, { token: string; templates: FakeTemplate[] }>();
  const pages = new Map<string, { token: string; platform: 'messenger' | 'instagram' }>();
  const profiles = new Map<string, { name?: string; username?: string }>();
  const media = new Map<string, Media>();
  const cdn = new Map<string, { bytes: Buffer; mimeType: string }>();
  /** Message ids the Send API answers next (a test that must know the id before the answer). */
  const nextMessageIds: string[] = [];
  const requests: RecordedRequest[] = [];
  const injected: Injected[] = [];
  let delayMs = 0;
  let seq = 0;

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      void handle(req, Buffer.concat(chunks)).then(async ({ status, body, headers }) => {
        if (delayMs > 0) await new Promise((resolve) => setTimeout(resolve, delayMs));
        if (res.destroyed) return;
        if (Buffer.isBuffer(body)) res.writeHead(status, headers).end(body);
        else if (typeof body === 'string') res.writeHead(status, { 'content-type': 'text/plain', ...headers }).end(body);
        else res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(body));
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const baseUrl = `http://127.0.0.1:${port}`;

  type Answer = { status: number; body: unknown; headers?: Record<string, string> };

  async function handle(req: http.IncomingMessage, raw: Buffer): Promise<Answer> {
    const url = new URL(req.url ?? '/', baseUrl);
    const query = Object.fromEntries(url.searchParams);
    const record: RecordedRequest = { method: req.method ?? 'GET', path: url.pathname, query, headers: req.headers, status: 0, at: Date.now() };
    requests.push(record);
    const answer = await route(req, url, raw, record);
    record.status = answer.status;
    return answer;
  }

  function tokenOf(req: http.IncomingMessage, url: URL): string | undefined {
    const header = req.headers.authorization;
    if (header?.startsWith('Bearer ')) return header.slice('Bearer '.length);
    return url.searchParams.get('access_token') ?? undefined;
  }

  async function parseForm(req: http.IncomingMessage, raw: Buffer, record: RecordedRequest) {
    const type = req.headers['content-type'] ?? '';
    if (!type.startsWith('multipart/form-data')) return undefined;
    const form = await new Response(Uint8Array.from(raw), { headers: { 'content-type': type } }).formData();
    const fields: Record<string, string | File> = {};
    record.form = {};
    for (const [name, value] of form) {
      fields[name] = value;
      record.form[name] = typeof value === 'string' ? value : { filename: value.name, type: value.type, size: value.size };
    }
    return fields;
  }

  async function route(req: http.IncomingMessage, url: URL, raw: Buffer, record: RecordedRequest): Promise<Answer> {
    // Messenger/Instagram attachment URLs: signed CDN links, no token; `/cdn/redirect/…` answers 302 to `/cdn/…` as lookaside URLs do.
    const cdnPath = /^\/cdn\/(redirect\/)?(.+)$/.exec(url.pathname);
    if (cdnPath) {
      if (cdnPath[1]) return { status: 302, body: '', headers: { location: `/cdn/${cdnPath[2]}${url.search}` } };
      const item = cdn.get(cdnPath[2]);
      if (!item) return { status: 404, body: 'Not Found' };
      return { status: 200, body: item.bytes, headers: { 'content-type': item.mimeType, 'content-length': String(item.bytes.length) } };
    }
    // Media bytes: the short-lived URL `GET /{media-id}` hands out, bearer token required.
    const bytesPath = /^\/whatsapp_business\/attachments\/([^/]+)$/.exec(url.pathname);
    if (bytesPath) {
      const item = media.get(bytesPath[1]);
      if (!item) return { status: 404, body: 'Not Found' };
      if (tokenOf(req, url) !== item.token) return metaError(401, 190, 'Invalid OAuth access token - Cannot parse access token');
      return { status: 200, body: item.bytes, headers: { 'content-type': item.mimeType, 'content-length': String(item.bytes.length) } };
    }
    const match = /^\/(v[0-9]+\.[0-9]+)\/([^/]+)(?:\/([a-z_]+))?$/.exec(url.pathname);
    if (!match) return metaError(400, 2500, 'Unknown path components');
    if (options.apiVersion && match[1] !== options.apiVersion) return metaError(400, 2635, `You are calling a deprecated version of the Graph API (${match[1]})`);
    const json = (req.headers['content-type'] ?? '').startsWith('application/json') ? parseJson(raw) : undefined;
    if (json !== undefined) record.json = json;
    // The first injected failure meant for this edge (or for any call).
    const at = injected.findIndex((failure) => failure.edge === undefined || failure.edge === (match[3] ?? ''));
    const next = at >= 0 ? injected.splice(at, 1)[0] : undefined;
    if (next) {
      if (next.rawBody !== undefined) return { status: next.status, body: next.rawBody };
      return metaError(next.status, next.code ?? 1, next.message ?? 'Injected failure', next.subcode);
    }
    const [, , id, edge] = match;
    const token = tokenOf(req, url);
    if (!token) return metaError(400, 2500, 'An active access token must be used to query information about the current user.');

    const number = whatsapp.get(id);
    if (number) {
      if (token !== number.token) return metaError(401, 190, 'Invalid OAuth access token - Cannot parse access token');
      if (req.method === 'POST' && edge === 'messages') return whatsappMessages(json);
      if (req.method === 'POST' && edge === 'media') return whatsappUpload(await parseForm(req, raw, record), token);
      return invalidParameter(`unsupported ${req.method} /${edge ?? ''} on a phone number`);
    }
    const waba = wabas.get(id);
    if (waba) {
      if (token !== waba.token) return metaError(401, 190, 'Invalid OAuth access token - Cannot parse access token');
      if (req.method === 'GET' && edge === 'message_templates') return templatePage(id, waba.templates, url.searchParams);
      return invalidParameter(`unsupported ${req.method} /${edge ?? ''} on a WhatsApp Business Account`);
    }
    const page = pages.get(id);
    if (page) {
      if (token !== page.token) return metaError(401, 190, 'Invalid OAuth access token - Cannot parse access token');
      if (req.method === 'POST' && edge === 'messages') return sendApi(json, page.platform);
      if (req.method === 'POST' && edge === 'message_attachments') return attachmentUpload(await parseForm(req, raw, record), page.platform);
      return invalidParameter(`unsupported ${req.method} /${edge ?? ''} on a page`);
    }
    const item = media.get(id);
    if (item && req.method === 'GET' && !edge) {
      if (token !== item.token) return metaError(401, 190, 'Invalid OAuth access token - Cannot parse access token');
      return {
        status: 200,
        body: {
          messaging_product: 'whatsapp',
          url: `${baseUrl}/whatsapp_business/attachments/${id}`,
          mime_type: item.mimeType,
          sha256: createHash('sha256').update(item.bytes).digest('hex'),
          file_size: String(item.bytes.length),
          id,
        },
      };
    }
    const profile = profiles.get(id);
    if (profile && req.method === 'GET' && !edge) {
      const fields = (url.searchParams.get('fields') ?? '').split(',');
      return { status: 200, body: { ...(fields.includes('name') && profile.name ? { name: profile.name } : {}), ...(fields.includes('username') && profile.username ? { username: profile.username } : {}), id } };
    }
    return metaError(400, 100, `Unsupported ${req.method} request. Object with ID '${id}' does not exist, cannot be loaded due to missing permissions, or does not support this operation.`, 33);
  }

  function whatsappMessages(json: unknown): Answer {
    if (typeof json !== 'object' || json === null) return invalidParameter('the body must be a JSON object');
    if (!('messaging_product' in json)) return metaError(400, 100, '(#100) The parameter messaging_product is required.');
    if (isWhatsAppRead(json)) return { status: 200, body: { success: true } };
    if (!isWhatsAppSend(json)) return invalidParameter('the message does not match any documented message object');
    return { status: 200, body: { messaging_product: 'whatsapp', contacts: [{ input: json.to, wa_id: json.to }], messages: [{ id: wamid(), ...(json.type === 'template' ? { message_status: 'accepted' } : {}) }] } };
  }

  function whatsappUpload(fields: Record<string, string | File> | undefined, token: string): Promise<Answer> | Answer {
    if (!fields) return invalidParameter('multipart/form-data expected');
    if (fields.messaging_product !== 'whatsapp') return metaError(400, 100, '(#100) The parameter messaging_product is required.');
    const file = fields.file;
    if (typeof fields.type !== 'string' || !fields.type) return metaError(400, 100, '(#100) The parameter type is required.');
    if (!(file instanceof File)) return metaError(400, 100, '(#100) The parameter file is required.');
    return file.arrayBuffer().then((buffer) => {
      const mediaId = String(1_000_000_000_000 + ++seq);
      media.set(mediaId, { bytes: Buffer.from(buffer), mimeType: String(fields.type), token });
      return { status: 200, body: { id: mediaId } };
    });
  }

  function templatePage(wabaId: string, templates: FakeTemplate[], params: URLSearchParams): Answer {
    const limit = Math.min(Number(params.get('limit') ?? '25') || 25, 100);
    const after = params.get('after');
    const start = after ? Number(Buffer.from(after, 'base64url').toString()) : 0;
    const data = templates.slice(start, start + limit).map((t, i) => ({ ...t, id: `${wabaId}${start + i}`, components: [{ type: 'BODY', text: 'Hello {{1}}' }] }));
    const end = start + data.length;
    const cursors = { before: Buffer.from(String(start)).toString('base64url'), after: Buffer.from(String(end)).toString('base64url') };
    const nextUrl = end < templates.length ? { next: `${baseUrl}/${options.apiVersion ?? 'v23.0'}/${wabaId}/message_templates?limit=${limit}&after=${cursors.after}` } : {};
    return { status: 200, body: { data, paging: { cursors, ...nextUrl } } };
  }

  function sendApi(json: unknown, platform: 'messenger' | 'instagram'): Answer {
    if (!isSendApi(json)) return invalidParameter('the request does not match the Send API');
    // Instagram's Send API documents one reaction, by name; Instagram text is at most 1,000 bytes.
    if (platform === 'instagram' && 'payload' in json && 'reaction' in json.payload && json.payload.reaction !== 'love') return invalidParameter('reaction must be love');
    if (platform === 'instagram' && 'message' in json && 'text' in json.message && Buffer.byteLength(json.message.text) > 1000) return invalidParameter('message text must be 1000 bytes or less');
    if ('sender_action' in json) return { status: 200, body: { recipient_id: json.recipient.id } };
    return { status: 200, body: { recipient_id: json.recipient.id, message_id: nextMessageIds.shift() ?? `m_${randomBytes(18).toString('base64url')}` } };
  }

  function attachmentUpload(fields: Record<string, string | File> | undefined, platform: 'messenger' | 'instagram'): Answer {
    if (!fields) return invalidParameter('multipart/form-data expected');
    if (platform === 'instagram' && fields.platform !== 'instagram') return invalidParameter('platform must be instagram for an Instagram account');
    if (typeof fields.message !== 'string' || !isAttachmentMessage(parseJson(Buffer.from(fields.message)))) return metaError(400, 100, '(#100) The parameter message is required and must describe an attachment.');
    if (!(fields.filedata instanceof File)) return metaError(400, 100, '(#100) Upload attachment failure: filedata is required.');
    return { status: 200, body: { attachment_id: String(2_000_000_000_000 + ++seq) } };
  }

  return {
    baseUrl,
    requests,
    /** Requests to one edge of one object, e.g. `sent('106540352242922', 'messages')`. */
    sent(id: string, edge: string) {
      return requests.filter((r) => r.path.endsWith(`/${id}/${edge}`));
    },
    addWhatsAppNumber(input: { phoneNumberId: string; wabaId: string; token: string }) {
      whatsapp.set(input.phoneNumberId, { wabaId: input.wabaId, token: input.token });
      if (!wabas.has(input.wabaId)) wabas.set(input.wabaId, { token: input.token, templates: [] });
    },
    addPage(input: { pageId: string; token: string }) {
      pages.set(input.pageId, { token: input.token, platform: 'messenger' });
    },
    addInstagramAccount(input: { instagramAccountId: string; token: string }) {
      pages.set(input.instagramAccountId, { token: input.token, platform: 'instagram' });
    },
    setTemplates(wabaId: string, templates: FakeTemplate[]) {
      const waba = wabas.get(wabaId);
      if (!waba) throw new Error(`unknown WABA ${wabaId}`);
      waba.templates = templates;
    },
    setProfile(handle: string, profile: { name?: string; username?: string }) {
      profiles.set(handle, profile);
    },
    /** Media a guest sent: answers `GET /{media-id}` and its URL for this token. */
    addMedia(input: { mediaId: string; bytes: Buffer; mimeType: string; token: string }) {
      media.set(input.mediaId, { bytes: input.bytes, mimeType: input.mimeType, token: input.token });
    },
    /** A Messenger/Instagram attachment on the fake CDN; answers its URL (`redirect`: one that 302s to it first). */
    addCdnFile(input: { name: string; bytes: Buffer; mimeType: string; redirect?: boolean }): string {
      cdn.set(input.name, { bytes: input.bytes, mimeType: input.mimeType });
      return `${baseUrl}/cdn/${input.redirect ? 'redirect/' : ''}${input.name}?_nc_cat=1&oh=signed`;
    },
    mediaBytes(mediaId: string): Buffer | undefined {
      return media.get(mediaId)?.bytes;
    },
    /** The next Send API messages get these ids, in order. */
    answerMessageIds(...ids: string[]) {
      nextMessageIds.push(...ids);
    },
    /** The next `count` Graph calls (not media downloads) answer this failure. */
    failNext(count: number, failure: Injected) {
      for (let i = 0; i < count; i++) injected.push(failure);
    },
    /** Every answer waits this long first (0: none). */
    setDelay(ms: number) {
      delayMs = ms;
    },
    reset() {
      requests.length = 0;
      injected.length = 0;
      delayMs = 0;
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

export type FakeGraph = Awaited<ReturnType<typeof startFakeGraph>>;

function parseJson(raw: Buffer): unknown {
  try {
    return JSON.parse(raw.toString('utf8'));
  } catch {
    return undefined;
  }
}
