/**
 * Every durable job task and the payload it is queued with (graphile-worker's `Tasks` idea): `enqueue` and
 * `JobRunner.register` read the payload type from here, so the code that queues a job and the code that runs
 * it cannot disagree. A task name not listed here (tests' probes) carries a free-form payload.
 */
export interface Tasks {
  maintenance: NoPayload;
  'crm.automation': NoPayload;
  'reservations.pre_checkin': NoPayload;
  'knowledge.recrawl': NoPayload;
  'messaging.send': { requestEventId: string };
  'knowledge.ingest': { sourceId: string };
  'knowledge.validate-asset': { sourceId: string };
  'knowledge.crawl': { crawlJobId: string };
  'channels.process-callback': { callbackId: string };
  /** One channel (on creation) or, without one, every whatsapp_cloud channel (and the next run scheduled). */
  'channels.template-sync': { channelId?: string };
  'channels.media-download': { messageId: string };
  /** The profile name of a Messenger/Instagram contact (src/channels/contact-profile.ts). */
  'channels.contact-profile': { channelId: string; contactId: string };
}

/** A task that is queued without a payload (stored as `{}`). */
export type NoPayload = Record<string, never>;

export type TaskName = keyof Tasks;

/** The payload of `T`: its declared one, or any JSON object for a task not in `Tasks`. */
export type PayloadOf<T extends string> = T extends TaskName ? Tasks[T] : Record<string, unknown>;
