#!/usr/bin/env node
import { readFileSync } from 'node:fs';
import { ApiConnectionError, ApiError } from '../index.js';
import { commandHelp, parseCommand, type Command } from './command.js';
import { COMMANDS } from './commands.js';
import { loadCliConfig } from './config.js';
import { UsageError } from './errors.js';

/** The summary's first clause, for the list of commands. */
function brief(summary: string): string {
  const clause = summary.split(/[.:;(]/)[0].trim();
  return clause.length <= 90 ? clause : `${clause.slice(0, clause.lastIndexOf(' ', 88))} …`;
}

function overview(commands: Command[], prefix: string[] = []): string {
  const lines = commands.map((command) => `  m2m ${command.words.join(' ').padEnd(22)} ${brief(command.summary)}`);
  return (
    `Usage: m2m ${prefix.length ? `${prefix.join(' ')} ` : ''}<command> [options]   (m2m <command> --help for its options)\n\n` +
    `Commands:\n${lines.join('\n')}\n\n` +
    (prefix.length ? '' : 'm2m --version (or -v) prints the version.\n\n') +
    'Configuration: M2M_API_KEY (an API key), M2M_BASE_URL (default http://127.0.0.1:8080/m2m/v1), M2M_ADMIN_TOKEN (the admin\n' +
    "API's token), M2M_STATE_DIR (default ./.m2m: what `m2m dev` and `m2m listen` keep across restarts).\n"
  );
}

/** The package's version: src/cli and dist/cli both sit two folders below packages/client/package.json. */
function version(): string {
  const manifest = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version?: unknown };
  return typeof manifest.version === 'string' ? manifest.version : 'unknown';
}

/** The command whose words start the arguments (the longest match). */
function find(args: string[]): Command | undefined {
  return COMMANDS.filter((command) => command.words.every((word, index) => args[index] === word)).sort((a, b) => b.words.length - a.words.length)[0];
}

async function main(args: string[]): Promise<number> {
  if (args.length === 1 && (args[0] === '--version' || args[0] === '-v')) {
    process.stdout.write(`${version()}\n`);
    return 0;
  }
  const command = find(args);
  if (!command) {
    const group = COMMANDS.filter((candidate) => args.length > 0 && candidate.words[0] === args[0]);
    const asked = args.length === 0 || args[0] === '--help' || args[0] === '-h' || args[0] === 'help';
    const text = group.length > 0 ? overview(group, group[0].words.slice(0, 1)) : overview(COMMANDS);
    const known = asked || (group.length > 0 && (args[1] === undefined || args[1] === '--help' || args[1] === '-h'));
    if (!known) process.stderr.write(`unknown command: m2m ${args.join(' ')}\n\n`);
    (known ? process.stdout : process.stderr).write(text);
    return known ? 0 : 2;
  }
  const parsed = parseCommand(command, args.slice(command.words.length));
  if (!parsed) {
    process.stdout.write(commandHelp(command));
    return 0;
  }
  const config = await loadCliConfig();
  return (await command.run({ ...parsed, config })) ?? 0;
}

function describe(error: unknown): { message: string; code: number } {
  if (error instanceof UsageError) return { message: `${error.message}\n(m2m --help lists the commands)`, code: 2 };
  if (error instanceof ApiError) {
    const details = error.details === undefined ? '' : `\n${JSON.stringify(error.details)}`;
    return { message: `${error.status} ${error.code}: ${error.message}${details}${error.requestId ? `\n(request id ${error.requestId})` : ''}`, code: 1 };
  }
  if (error instanceof ApiConnectionError) return { message: `${error.message}\nIs the server running? (npx m2m dev starts one)`, code: 1 };
  return { message: error instanceof Error ? error.message : String(error), code: 1 };
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    const { message, code } = describe(error);
    process.stderr.write(`error: ${message}\n`);
    process.exitCode = code;
  },
);
