import pino, { type Bindings, type ChildLoggerOptions, type LogFn } from 'pino';

/** What a lazy child needs of its parent (pino's Logger and Fastify's request logger both fit). */
export interface LevelLogger {
  level: string;
  fatal: LogFn;
  error: LogFn;
  warn: LogFn;
  info: LogFn;
  debug: LogFn;
  trace: LogFn;
  silent: LogFn;
  child(bindings: Bindings, options?: ChildLoggerOptions): LevelLogger;
}

type Level = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace';

function enabled(logger: LevelLogger, level: Level): boolean {
  const threshold = pino.levels.values[logger.level];
  return threshold !== undefined && pino.levels.values[level] >= threshold;
}

/**
 * A child logger that becomes a real pino child only when something is logged at an enabled level. Every
 * request binds fields twice (Fastify: the request id; the auth hook: tenant and key) and every webhook
 * attempt once; making a pino child is work on every request, while most requests and attempts log nothing at
 * the production level. Log lines are the same as with `parent.child(bindings)`.
 */
class LazyChild implements LevelLogger {
  private made: LevelLogger | undefined;

  constructor(
    private readonly parent: LevelLogger,
    private readonly bindings: Bindings,
    private readonly options: ChildLoggerOptions | undefined,
  ) {}

  /** The pino child (made on first need); a lazy parent contributes its own pino child. */
  real(): LevelLogger {
    return (this.made ??= realOf(this.parent).child(this.bindings, this.options));
  }

  get level(): string {
    return (this.made ?? this.parent).level;
  }

  set level(level: string) {
    this.real().level = level;
  }

  private write(level: Level, args: unknown[]): void {
    if (!enabled(this.made ?? this.parent, level)) return;
    const target = this.real();
    (target[level] as (...a: unknown[]) => void).apply(target, args);
  }

  fatal(...args: unknown[]): void {
    this.write('fatal', args);
  }
  error(...args: unknown[]): void {
    this.write('error', args);
  }
  warn(...args: unknown[]): void {
    this.write('warn', args);
  }
  info(...args: unknown[]): void {
    this.write('info', args);
  }
  debug(...args: unknown[]): void {
    this.write('debug', args);
  }
  trace(...args: unknown[]): void {
    this.write('trace', args);
  }
  silent(): void {}

  child(bindings: Bindings, options?: ChildLoggerOptions): LevelLogger {
    return lazyChild(this, bindings, options);
  }
}

function realOf(logger: LevelLogger): LevelLogger {
  return logger instanceof LazyChild ? logger.real() : logger;
}

export function lazyChild(parent: LevelLogger, bindings: Bindings, options?: ChildLoggerOptions): LevelLogger {
  // A child with its own level must exist for that level to apply.
  if (options?.level !== undefined) return realOf(parent).child(bindings, options);
  return new LazyChild(parent, bindings, options);
}
