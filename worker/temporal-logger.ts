import type { LogLevel, LogMetadata, Logger } from '@temporalio/common';
import type { Logger as Pino } from 'pino';

const LEVEL: Record<LogLevel, 'trace' | 'debug' | 'info' | 'warn' | 'error'> = {
  TRACE: 'trace',
  DEBUG: 'debug',
  INFO: 'info',
  WARN: 'warn',
  ERROR: 'error',
};

/**
 * The Temporal Runtime's logger, writing through pino: SDK messages and activity context logs
 * (`Context.current().log`, which adds workflowId, workflowType, activityId, activityType,
 * taskQueue and attempt) become JSON lines like the API's. `error` metadata goes under pino's
 * `err` so it is serialized with its message and stack.
 */
export class PinoTemporalLogger implements Logger {
  constructor(private readonly pino: Pino) {}

  log(level: LogLevel, message: string, meta: LogMetadata = {}): void {
    // The task token is an opaque capability to complete the task: not for logs.
    const { error, taskToken: _taskToken, ...rest } = meta as Record<string, unknown>;
    this.pino[LEVEL[level]](error === undefined ? rest : { ...rest, err: error }, message);
  }

  trace(message: string, meta?: LogMetadata): void {
    this.log('TRACE', message, meta);
  }

  debug(message: string, meta?: LogMetadata): void {
    this.log('DEBUG', message, meta);
  }

  info(message: string, meta?: LogMetadata): void {
    this.log('INFO', message, meta);
  }

  warn(message: string, meta?: LogMetadata): void {
    this.log('WARN', message, meta);
  }

  error(message: string, meta?: LogMetadata): void {
    this.log('ERROR', message, meta);
  }
}
