import type { Queryable } from '../db/driver.js';

/** Why a send is refused (send_refusal, src/messaging/sql/send_refusal.sql, decides; each path maps it to its answer). */
export type SendRefusal = 'channel_unavailable' | 'recipient_opted_out' | 'recipient_no_consent';

/** The facts a path has read (under its locks); one it has not read yet is left out and not checked. */
export interface SendFacts {
  channelAvailable?: boolean;
  optedOut?: boolean;
  consentRequired?: boolean;
  consent?: boolean;
}

/** The send rules, asked of the one function that holds them, so that replies (decided in SQL) and every other path agree. */
export async function sendRefusal(db: Queryable, facts: SendFacts): Promise<SendRefusal | undefined> {
  const rows = await db.query<{ refusal: SendRefusal | null }>('SELECT send_refusal($1, $2, $3, $4) AS refusal', [
    facts.channelAvailable ?? null,
    facts.optedOut ?? null,
    facts.consentRequired ?? null,
    facts.consent ?? null,
  ]);
  return rows[0]?.refusal ?? undefined;
}
