import pino, { type DestinationStream, type Logger, type LoggerOptions } from 'pino';
import pretty from 'pino-pretty';
import type { Config } from './config.ts';
import { VENDOR_SECRET_PATHS } from './vendor-names.ts';

/**
 * Where a key or a secret could sit in a log object. Request headers are not serialized by
 * default; these paths keep them out should anything log headers, a request or a config.
 */
export const REDACT_PATHS = [
  'req.headers.authorization',
  'req.headers["x-internal-secret"]',
  'req.headers.cookie',
  'headers.authorization',
  'headers["x-internal-secret"]',
  'headers.cookie',
  'authorization',
  'internalSecret',
  'config.INTERNAL_SECRET',
  ...VENDOR_SECRET_PATHS,
  'config.AUTH_SECRET',
  'config.SMTP_URL',
  'config.GITHUB_CLIENT_SECRET',
  'config.GOOGLE_CLIENT_SECRET',
  'config.STRIPE_SECRET_KEY',
  'config.STRIPE_WEBHOOK_SECRET',
  'config.S3_SECRET_ACCESS_KEY',
  'res.headers["set-cookie"]',
];

/** pino options shared by the API and the worker: JSON lines, ISO time, `service` field, redaction. */
export function loggerOptions(config: Pick<Config, 'LOG_LEVEL'>, service: 'api' | 'worker' | 'web'): LoggerOptions {
  return {
    level: config.LOG_LEVEL,
    base: { service, pid: process.pid },
    timestamp: pino.stdTimeFunctions.isoTime,
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
  };
}

/**
 * JSON or human-readable lines: `LOG_FORMAT` when it says so, otherwise pretty exactly when stdout
 * is a terminal (someone reading `npm start`), JSON when it is a pipe or a file (a log collector,
 * a container runtime, a test reading the lines).
 */
export function logFormat(setting: Config['LOG_FORMAT'], stdoutIsTTY: boolean | undefined): 'json' | 'pretty' {
  if (setting !== 'auto') return setting;
  return stdoutIsTTY === true ? 'pretty' : 'json';
}

/**
 * The process logger; tests pass a destination to read the lines. Pretty output is written
 * synchronously in this thread (no transport worker), so a crash loses no line.
 */
export function createLogger(
  config: Pick<Config, 'LOG_LEVEL'> & Partial<Pick<Config, 'LOG_FORMAT'>>,
  service: 'api' | 'worker' | 'web',
  destination?: DestinationStream,
): Logger {
  if (destination) return pino(loggerOptions(config, service), destination);
  if (logFormat(config.LOG_FORMAT ?? 'auto', process.stdout.isTTY) === 'pretty') {
    return pino(
      loggerOptions(config, service),
      pretty({
        sync: true,
        singleLine: true,
        translateTime: 'SYS:HH:MM:ss.l',
        // npm start interleaves the API's, the worker's and the console's lines: lead with the service.
        messageFormat: '[{service}] {msg}',
        ignore: 'pid,hostname,service',
      }),
    );
  }
  return pino(loggerOptions(config, service));
}
