import type { FastifyBaseLogger } from 'fastify';
import pino, { type Bindings, type ChildLoggerOptions, type LogFn } from 'pino';

type Level = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace';

/** The pino logger behind a lazy one (made on first call). */
const REAL = Symbol('real logger');
type Lazy = FastifyBaseLogger & { [REAL]: () => FastifyBaseLogger };

function realOf(logger: FastifyBaseLogger): FastifyBaseLogger {
  return REAL in logger ? (logger as Lazy)[REAL]() : logger;
}

function enabled(logger: FastifyBaseLogger, level: Level): boolean {
  const threshold = pino.levels.values[logger.level];
  return threshold !== undefined && pino.levels.values[level] >= threshold;
}

/**
 * A child logger that becomes a real pino child only when something is logged at an enabled level. Every
 * request binds fields twice (Fastify: the request id; the auth hook: tenant and key), and two pino children
 * per request measured about 3% of a list request's CPU, while most requests log nothing at the production
 * level. Log lines are the same as with `parent.child(bindings)`.
 */
export function lazyChild(parent: FastifyBaseLogger, bindings: Bindings, options?: ChildLoggerOptions): FastifyBaseLogger {
  if (options?.level !== undefined) return realOf(parent).child(bindings, options);
  let real: FastifyBaseLogger | undefined;
  const materialize = (): FastifyBaseLogger => (real ??= realOf(parent).child(bindings, options));
  const logAt = (level: Level): LogFn =>
    function log(this: unknown, ...args: unknown[]) {
      if (!enabled(real ?? parent, level)) return;
      const target = materialize();
      (target[level] as (...a: unknown[]) => void).apply(target, args);
    } as LogFn;
  const logger: Lazy = {
    [REAL]: materialize,
    get level() {
      return (real ?? parent).level;
    },
    set level(level) {
      materialize().level = level;
    },
    fatal: logAt('fatal'),
    error: logAt('error'),
    warn: logAt('warn'),
    info: logAt('info'),
    debug: logAt('debug'),
    trace: logAt('trace'),
    silent: (() => undefined) as LogFn,
    child: (more, moreOptions) => lazyChild(logger, more, moreOptions),
  };
  return logger;
}
