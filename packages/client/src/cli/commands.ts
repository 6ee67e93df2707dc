import type { Command } from './command.js';
import { devCommand } from './dev.js';
import { listenCommand } from './listen.js';
import { resourceCommands } from './resources.js';
import { triggerCommand } from './trigger.js';

/** Every `m2m` command, in the order `m2m --help` lists them. */
export const COMMANDS: Command[] = [devCommand, listenCommand, triggerCommand, ...resourceCommands];
