import { LenstackError } from '@lenstack/client';

/** What `lenstack` exits with; scripts may rely on these (README "Clients"). */
export const EXIT = {
  OK: 0,
  /** A fault of the CLI itself. */
  INTERNAL: 1,
  /** Bad arguments, or an input file or folder that cannot be read. */
  USAGE: 2,
  /** No LENSTACK_API_KEY, or the API refused the key (401). */
  AUTH: 3,
  /** Not enough credits (402 PLAN_LIMIT_EXCEEDED, or a batch paused for credits). */
  CREDITS: 4,
  /** Any other error answer of the API (4xx, 5xx), after the client's retries. */
  API: 5,
  /** No answer from the API (refused, reset, DNS), after the client's retries. */
  NETWORK: 6,
  /** Stopped by Ctrl-C (SIGINT) or SIGTERM while uploading (the same command continues), or while an output file was claimed (output.ts). */
  INTERRUPTED: 130,
} as const;
export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

/** A failure the CLI reports and exits on, with the code scripts see. */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode: ExitCode,
    readonly details: Record<string, unknown> = {},
  ) {
    super(message);
  }
}

export function exitCodeOf(err: unknown): ExitCode {
  if (err instanceof CliError) return err.exitCode;
  if (err instanceof LenstackError) {
    if (err.code === 'NETWORK_ERROR') return EXIT.NETWORK;
    if (err.status === 401 || err.code === 'AUTH_FAILED') return EXIT.AUTH;
    if (err.status === 402 || err.code === 'PLAN_LIMIT_EXCEEDED') return EXIT.CREDITS;
    return EXIT.API;
  }
  return EXIT.INTERNAL;
}
