import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { fingerprint, readJson, stateDir, writeJson } from './config.js';

/** Where one feed (a base URL, a key and a type filter) stands: the page start and the events of that page already sent. */
export interface FeedPosition {
  cursor?: string;
  sent: string[];
}

interface ListenFile {
  secret: string;
  feeds: Record<string, FeedPosition>;
}

/**
 * The listener's memory across restarts: one signing secret (so a receiver configured with it keeps working)
 * and, per feed, the cursor it reached. Only a fingerprint of the key is stored.
 */
export class ListenState {
  private constructor(
    private readonly file: string,
    private readonly data: ListenFile,
    private readonly feedKey: string,
  ) {}

  static async open(options: { baseUrl: string; apiKey: string; types?: string[]; file?: string }): Promise<ListenState> {
    const file = options.file ?? listenFile();
    const data = (await readJson<ListenFile>(file)) ?? { secret: newSecret(), feeds: {} };
    const feedKey = `${options.baseUrl} ${fingerprint(options.apiKey)} ${options.types?.join(',') ?? '*'}`;
    const state = new ListenState(file, data, feedKey);
    await state.save();
    return state;
  }

  get secret(): string {
    return this.data.secret;
  }

  get position(): FeedPosition | undefined {
    return this.data.feeds[this.feedKey];
  }

  async record(position: FeedPosition): Promise<void> {
    this.data.feeds[this.feedKey] = position;
    await this.save();
  }

  private save(): Promise<void> {
    return writeJson(this.file, this.data);
  }
}

export const listenFile = () => join(stateDir(), 'listen.json');

/**
 * The secret `m2m listen` signs with, created now if no listener ran yet: `m2m dev` prints it in the receiver's
 * command, which can then start before the listener.
 */
export async function listenSecret(file = listenFile()): Promise<string> {
  const saved = await readJson<ListenFile>(file);
  if (saved) return saved.secret;
  const created: ListenFile = { secret: newSecret(), feeds: {} };
  await writeJson(file, created);
  return created.secret;
}

/** The same form as a subscription's secret: `whsec_` and 192 random bits. */
function newSecret(): string {
  return `whsec_${randomBytes(24).toString('base64url')}`;
}
