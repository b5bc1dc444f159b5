import pino, { type DestinationStream, type Logger, type LoggerOptions } from 'pino';
import type { Config } from './config.ts';

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
  'config.OPENAI_API_KEY',
  'config.ANTHROPIC_API_KEY',
  'config.GEMINI_API_KEY',
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

/** The process logger; tests pass a destination to read the lines. */
export function createLogger(config: Pick<Config, 'LOG_LEVEL'>, service: 'api' | 'worker' | 'web', destination?: DestinationStream): Logger {
  return destination ? pino(loggerOptions(config, service), destination) : pino(loggerOptions(config, service));
}
