import { Type, type Static, type TSchema } from 'typebox';
import { Validator } from 'typebox/compile';

/*
 * Meta's callback payloads, as far as we rely on them. Objects accept extra properties (Meta adds fields without
 * notice); the properties we read are typed strictly. The envelope is checked first and rejects the whole payload;
 * each entry, change, message and status is then checked on its own, so one odd item is counted and skipped (or,
 * for a message, kept as `unsupported`) instead of losing the rest of a 5,000-entry callback.
 */

/** A check compiled on first use: most processes never parse a callback of every object. */
export function lazyCheck<T extends TSchema>(schema: T): (value: unknown) => value is Static<T> {
  const context: Record<never, never> = {};
  let validator: Validator<typeof context, T> | undefined;
  return (value: unknown): value is Static<T> => {
    validator ??= new Validator(context, schema);
    return validator.Check(value);
  };
}

const Id = Type.String({ minLength: 1, maxLength: 512 });
/** Meta sends WhatsApp timestamps as Unix seconds in a string. */
const UnixSecondsText = Type.String({ pattern: '^[0-9]{1,12}$' });
/** Messenger/Instagram send Unix milliseconds as a number (some documented examples: seconds, or a string). */
const LooseTimestamp = Type.Union([Type.Number({ minimum: 0 }), Type.String({ pattern: '^[0-9]{1,13}$' })]);

// ---------------------------------------------------------------------------------------------
// Envelopes
// ---------------------------------------------------------------------------------------------

export const WhatsAppEnvelope = Type.Object({
  object: Type.Literal('whatsapp_business_account'),
  entry: Type.Array(
    Type.Object({
      id: Type.String(),
      changes: Type.Array(Type.Object({ field: Type.String(), value: Type.Unknown() })),
    }),
  ),
});

export const MessagingEnvelope = Type.Object({
  object: Type.Union([Type.Literal('page'), Type.Literal('instagram')]),
  entry: Type.Array(
    Type.Object({
      id: Type.String(),
      time: Type.Optional(Type.Number()),
      messaging: Type.Optional(Type.Array(Type.Unknown())),
      // Messages received while another app holds the thread (handover protocol); read like messaging.
      standby: Type.Optional(Type.Array(Type.Unknown())),
      changes: Type.Optional(Type.Array(Type.Unknown())),
    }),
  ),
});

// ---------------------------------------------------------------------------------------------
// WhatsApp: entry[].changes[].value for field "messages"
// ---------------------------------------------------------------------------------------------

export const WhatsAppError = Type.Object({
  code: Type.Union([Type.Integer(), Type.String()]),
  title: Type.Optional(Type.String()),
  message: Type.Optional(Type.String()),
  error_data: Type.Optional(Type.Object({ details: Type.Optional(Type.String()) })),
});

export const WhatsAppMessagesValue = Type.Object({
  messaging_product: Type.Optional(Type.Literal('whatsapp')),
  metadata: Type.Object({ phone_number_id: Id, display_phone_number: Type.Optional(Type.String()) }),
  contacts: Type.Optional(Type.Array(Type.Object({ wa_id: Type.Optional(Type.String()), profile: Type.Optional(Type.Object({ name: Type.Optional(Type.String()) })) }))),
  messages: Type.Optional(Type.Array(Type.Unknown())),
  statuses: Type.Optional(Type.Array(Type.Unknown())),
  errors: Type.Optional(Type.Array(Type.Unknown())),
});

/** What every WhatsApp message has, whatever its type. */
export const WhatsAppMessageBase = Type.Object({
  from: Type.String({ pattern: '^[0-9]{4,20}$' }),
  id: Id,
  timestamp: UnixSecondsText,
  type: Type.String(),
  context: Type.Optional(Type.Object({ id: Type.Optional(Type.String()), from: Type.Optional(Type.String()) })),
  errors: Type.Optional(Type.Array(Type.Unknown())),
});

export const WhatsAppText = Type.Object({ text: Type.Object({ body: Type.String() }) });

export const WhatsAppMediaObject = Type.Object({
  id: Id,
  mime_type: Type.Optional(Type.String()),
  sha256: Type.Optional(Type.String()),
  caption: Type.Optional(Type.String()),
  filename: Type.Optional(Type.String()),
  voice: Type.Optional(Type.Boolean()),
  animated: Type.Optional(Type.Boolean()),
});

/** The media object of an image, audio, video, document or sticker message sits under the message's type. */
export const WhatsAppMedia = Type.Object({
  image: Type.Optional(WhatsAppMediaObject),
  audio: Type.Optional(WhatsAppMediaObject),
  video: Type.Optional(WhatsAppMediaObject),
  document: Type.Optional(WhatsAppMediaObject),
  sticker: Type.Optional(WhatsAppMediaObject),
});

export const WhatsAppLocation = Type.Object({
  location: Type.Object({
    latitude: Type.Number({ minimum: -90, maximum: 90 }),
    longitude: Type.Number({ minimum: -180, maximum: 180 }),
    name: Type.Optional(Type.String()),
    address: Type.Optional(Type.String()),
  }),
});

export const WhatsAppContactCard = Type.Object({
  name: Type.Optional(Type.Object({ formatted_name: Type.Optional(Type.String()), first_name: Type.Optional(Type.String()), last_name: Type.Optional(Type.String()) })),
  phones: Type.Optional(Type.Array(Type.Object({ phone: Type.Optional(Type.String()), wa_id: Type.Optional(Type.String()) }))),
  emails: Type.Optional(Type.Array(Type.Object({ email: Type.Optional(Type.String()) }))),
});

export const WhatsAppContacts = Type.Object({ contacts: Type.Array(Type.Unknown()) });

const ReplyChoice = Type.Object({ id: Type.String(), title: Type.String() });

export const WhatsAppInteractive = Type.Object({
  interactive: Type.Union([
    Type.Object({ type: Type.Literal('button_reply'), button_reply: ReplyChoice }),
    Type.Object({ type: Type.Literal('list_reply'), list_reply: ReplyChoice }),
  ]),
});

/** A tap on a template's quick-reply button. */
export const WhatsAppButton = Type.Object({ button: Type.Object({ text: Type.String(), payload: Type.Optional(Type.String()) }) });

/** `emoji` is omitted when the guest removes the reaction. */
export const WhatsAppReaction = Type.Object({ reaction: Type.Object({ message_id: Id, emoji: Type.Optional(Type.String()) }) });

export const WhatsAppUnsupported = Type.Object({ unsupported: Type.Object({ type: Type.Optional(Type.String()) }) });

export const WhatsAppStatus = Type.Object({
  id: Id,
  status: Type.String(),
  timestamp: UnixSecondsText,
  recipient_id: Type.Optional(Type.String()),
  errors: Type.Optional(Type.Array(WhatsAppError)),
});

// ---------------------------------------------------------------------------------------------
// Messenger and Instagram: entry[].messaging[]
// ---------------------------------------------------------------------------------------------

export const MessagingBase = Type.Object({
  sender: Type.Object({ id: Id }),
  recipient: Type.Object({ id: Id }),
  timestamp: Type.Optional(LooseTimestamp),
});

export const MessagingAttachment = Type.Object({
  type: Type.String(),
  payload: Type.Optional(
    Type.Object({ url: Type.Optional(Type.String()), title: Type.Optional(Type.String()), sticker_id: Type.Optional(Type.Union([Type.Number(), Type.String()])) }),
  ),
});

export const MessagingMessage = Type.Object({
  message: Type.Object({
    mid: Id,
    text: Type.Optional(Type.String()),
    is_echo: Type.Optional(Type.Boolean()),
    app_id: Type.Optional(Type.Union([Type.Number(), Type.String()])),
    attachments: Type.Optional(Type.Array(Type.Unknown())),
    quick_reply: Type.Optional(Type.Object({ payload: Type.String() })),
    reply_to: Type.Optional(Type.Object({ mid: Type.Optional(Type.String()) })),
    is_deleted: Type.Optional(Type.Boolean()),
    is_unsupported: Type.Optional(Type.Boolean()),
  }),
});

export const MessagingPostback = Type.Object({
  postback: Type.Object({ mid: Type.Optional(Type.String()), title: Type.Optional(Type.String()), payload: Type.Optional(Type.String()) }),
});

export const MessagingReaction = Type.Object({
  reaction: Type.Object({
    mid: Id,
    action: Type.Optional(Type.String()),
    emoji: Type.Optional(Type.String()),
    reaction: Type.Optional(Type.String()),
  }),
});

export const MessagingDelivery = Type.Object({
  delivery: Type.Object({ mids: Type.Optional(Type.Array(Type.String())), watermark: Type.Optional(Type.Number()) }),
});

/** Messenger `read` carries a watermark; Instagram `messaging_seen` names the message read (`mid`). */
export const MessagingRead = Type.Object({
  read: Type.Object({ watermark: Type.Optional(Type.Number()), mid: Type.Optional(Type.String()) }),
});

export const isWhatsAppEnvelope = lazyCheck(WhatsAppEnvelope);
export const isMessagingEnvelope = lazyCheck(MessagingEnvelope);
export const isWhatsAppMessagesValue = lazyCheck(WhatsAppMessagesValue);
export const isWhatsAppMessageBase = lazyCheck(WhatsAppMessageBase);
export const isWhatsAppText = lazyCheck(WhatsAppText);
export const isWhatsAppMedia = lazyCheck(WhatsAppMedia);
export const isWhatsAppLocation = lazyCheck(WhatsAppLocation);
export const isWhatsAppContactCard = lazyCheck(WhatsAppContactCard);
export const isWhatsAppContacts = lazyCheck(WhatsAppContacts);
export const isWhatsAppInteractive = lazyCheck(WhatsAppInteractive);
export const isWhatsAppButton = lazyCheck(WhatsAppButton);
export const isWhatsAppReaction = lazyCheck(WhatsAppReaction);
export const isWhatsAppUnsupported = lazyCheck(WhatsAppUnsupported);
export const isWhatsAppStatus = lazyCheck(WhatsAppStatus);
export const isWhatsAppError = lazyCheck(WhatsAppError);
export const isMessagingBase = lazyCheck(MessagingBase);
export const isMessagingAttachment = lazyCheck(MessagingAttachment);
export const isMessagingMessage = lazyCheck(MessagingMessage);
export const isMessagingPostback = lazyCheck(MessagingPostback);
export const isMessagingReaction = lazyCheck(MessagingReaction);
export const isMessagingDelivery = lazyCheck(MessagingDelivery);
export const isMessagingRead = lazyCheck(MessagingRead);

export type WhatsAppMessageBaseT = Static<typeof WhatsAppMessageBase>;
export type WhatsAppErrorT = Static<typeof WhatsAppError>;
export type MessagingBaseT = Static<typeof MessagingBase>;
