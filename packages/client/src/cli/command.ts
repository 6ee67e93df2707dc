import { parseArgs } from 'node:util';
import type { CliConfig } from './config.js';
import { UsageError } from './errors.js';

type OptionKind = { type: 'string' | 'boolean'; short?: string };
type Option = OptionKind & { description: string };

/** One CLI command: its words (`webhooks recover`), its options and what it does. */
export interface Command {
  words: string[];
  /** `<subscriptionId> --since <date-time> [--until <date-time>]` */
  usage: string;
  summary: string;
  options: Record<string, Option>;
  /** Names of the required positional arguments, in order. */
  positionals?: string[];
  run(input: CommandInput): Promise<number | void>;
}

export interface CommandInput {
  values: Values;
  positionals: string[];
  json: boolean;
  config: CliConfig;
}

export class Values {
  constructor(private readonly values: Record<string, string | boolean | Array<string | boolean> | undefined>) {}

  string(name: string): string | undefined {
    const value = this.values[name];
    return typeof value === 'string' ? value : undefined;
  }

  required(name: string): string {
    const value = this.string(name);
    if (value === undefined || value === '') throw new UsageError(`--${name} is required`);
    return value;
  }

  flag(name: string): boolean {
    return this.values[name] === true;
  }

  integer(name: string): number | undefined {
    const value = this.string(name);
    if (value === undefined) return undefined;
    if (!/^\d+$/.test(value)) throw new UsageError(`--${name} must be a whole number, got "${value}"`);
    return Number(value);
  }

  /** `a,b` → `['a', 'b']` */
  list(name: string): string[] | undefined {
    const value = this.string(name);
    if (value === undefined) return undefined;
    const items = value.split(',').map((item) => item.trim()).filter((item) => item !== '');
    if (items.length === 0) throw new UsageError(`--${name} needs at least one value`);
    return items;
  }
}

const COMMON: Record<string, Option> = {
  json: { type: 'boolean', description: 'print JSON (one object per line) instead of text' },
  help: { type: 'boolean', short: 'h', description: 'show this help' },
};

export function commandHelp(command: Command): string {
  const options = { ...command.options, ...COMMON };
  const lines = Object.entries(options).map(([name, option]) => {
    const flag = `--${name}${option.type === 'string' ? ' <value>' : ''}`;
    return `  ${flag.padEnd(28)} ${option.description}`;
  });
  return `Usage: m2m ${command.words.join(' ')} ${command.usage}`.trimEnd() + `\n\n${command.summary}\n\nOptions:\n${lines.join('\n')}\n`;
}

/** Parses the arguments after the command's words; `undefined` when `--help` was asked for. */
export function parseCommand(command: Command, args: string[]): { values: Values; positionals: string[]; json: boolean } | undefined {
  const options: Record<string, OptionKind> = {};
  for (const [name, option] of Object.entries({ ...command.options, ...COMMON })) {
    options[name] = option.short ? { type: option.type, short: option.short } : { type: option.type };
  }
  let parsed;
  try {
    parsed = parseArgs({ args, options, allowPositionals: true, strict: true });
  } catch (error) {
    throw new UsageError(error instanceof Error ? error.message : String(error));
  }
  const values = new Values(parsed.values);
  if (values.flag('help')) return undefined;
  const required = command.positionals ?? [];
  if (parsed.positionals.length < required.length) {
    throw new UsageError(`missing ${required.slice(parsed.positionals.length).map((name) => `<${name}>`).join(' ')}`);
  }
  if (parsed.positionals.length > required.length) throw new UsageError(`unexpected argument "${parsed.positionals[required.length]}"`);
  return { values, positionals: parsed.positionals, json: values.flag('json') };
}
