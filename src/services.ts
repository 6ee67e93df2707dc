import { WebchatService } from './channels/webchat/service.js';
import type { Logger } from 'pino';
import type { Clock } from './clock.js';
import type { Config } from './config.js';
import type { Db } from './db/driver.js';
import type { Keyring } from './secrets.js';
import { ApiKeyService } from './auth/keys.js';
import { ChannelService } from './channels/service.js';
import { ConversationService } from './conversations/service.js';
import { InboxService } from './conversations/inbox.js';
import { ContactService } from './conversations/contacts.js';
import { HandoffService } from './conversations/handoffs.js';
import { ConversationContentService } from './conversations/content.js';
import { ReplyService } from './messaging/reply.js';
import { TypingService } from './messaging/receipts.js';
import { Cursors } from './platform/cursor.js';
import { MessagingService } from './messaging/service.js';
import { OutboundQueue } from './messaging/outbound.js';
import { CrmService } from './crm/service.js';
import { FollowUpSender } from './messaging/follow-up-send.js';
import { SalesService } from './crm/sales.js';
import { ReservationService } from './reservations/service.js';
import { ReservationHistoryService } from './reservations/history.js';
import { TenantService } from './tenants/service.js';
import { KnowledgeService } from './knowledge/service.js';
import { AssetService } from './knowledge/assets.js';
import { KnowledgeSourceService } from './knowledge/sources.js';
import { createBlobStore, type BlobStore } from './knowledge/blob-store.js';
import { CrawlService } from './knowledge/crawler/service.js';
import { createEmbedder } from './knowledge/crawler/worker.js';
import { WebhookService } from './webhooks/service.js';
import type { Resolver } from './net/guard.js';
import { EventService } from './events/service.js';

/** Everything a route, an MCP tool or a worker needs, built once per process. */
export interface Services {
  config: Config;
  db: Db;
  clock: Clock;
  keyring: Keyring;
  log: Logger;
  cursors: Cursors;
  tenants: TenantService;
  apiKeys: ApiKeyService;
  channels: ChannelService;
  webhooks: WebhookService;
  events: EventService;
  conversations: ConversationService;
  inbox: InboxService;
  contacts: ContactService;
  handoffs: HandoffService;
  conversationContent: ConversationContentService;
  replies: ReplyService;
  typing: TypingService;
  messaging: MessagingService;
  outbound: OutboundQueue;
  crm: CrmService;
  followUpSender: FollowUpSender;
  sales: SalesService;
  reservations: ReservationService;
  reservationHistory: ReservationHistoryService;
  blobs: BlobStore;
  knowledge: KnowledgeService;
  knowledgeAssets: AssetService;
  knowledgeSources: KnowledgeSourceService;
  crawls: CrawlService;
  webchat: WebchatService;
}

export function createServices(deps: { config: Config; db: Db; clock: Clock; keyring: Keyring; log: Logger; resolver?: Resolver }): Services {
  const { config, db, clock, keyring, log, resolver } = deps;
  const apiKeys = new ApiKeyService(db, clock, { cacheTtlMs: config.apiKeyCacheTtlMs });
  const cursors = new Cursors(keyring.signingKey);
  const webhooks = new WebhookService({ db, clock, keyring, cursors, allowPrivateDestinations: config.allowPrivateDestinations, resolver });
  apiKeys.onChange((tx, change) => webhooks.onApiKeyChanged(tx, change));
  const outbound = new OutboundQueue(config.sendMaxAttempts);
  const blobs = createBlobStore(config);
  return {
    ...deps,
    cursors,
    tenants: new TenantService(db, clock),
    apiKeys,
    channels: new ChannelService(db, clock, keyring.encryptionKey, config.meta.systemUserToken !== undefined),
    webhooks,
    events: new EventService({ db, clock, cursors }),
    conversations: new ConversationService(db, clock, cursors),
    inbox: new InboxService(db, clock),
    contacts: new ContactService(db, clock),
    handoffs: new HandoffService(db, clock),
    conversationContent: new ConversationContentService(db, cursors, blobs),
    replies: new ReplyService(db, clock, outbound, blobs),
    typing: new TypingService(db, clock),
    messaging: new MessagingService(db, clock, outbound),
    outbound,
    crm: new CrmService(db, clock, cursors),
    sales: new SalesService(db, cursors),
    followUpSender: new FollowUpSender(db, clock, outbound, log.child({ component: 'crm' })),
    reservations: new ReservationService({ db, clock, cursors, outbound, log, preCheckinDays: config.lifecyclePreCheckinDays }),
    reservationHistory: new ReservationHistoryService(db, cursors),
    blobs,
    knowledge: new KnowledgeService(db, clock, cursors, blobs, config.allowPrivateDestinations, createEmbedder(config)),
    knowledgeAssets: new AssetService(db, clock, blobs, keyring.signingKey, cursors),
    knowledgeSources: new KnowledgeSourceService(db, clock, blobs),
    crawls: new CrawlService(db, clock, config.allowPrivateDestinations),
    webchat: new WebchatService(db, clock, keyring.signingKey, config.webchatRateLimitPerMinute, (error) => log.warn({ err: error }, 'webchat streams: reading new events failed; will retry')),
  };
}
