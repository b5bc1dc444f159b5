import { LenstackError } from '@lenstack/client';
import { CliError, exitCodeOf } from './exit-codes.ts';

/**
 * The line a failure ends the CLI with, on stderr: JSON under `--json`, else a sentence. A failure
 * after a batch was made names it (`errorContext`): the batch runs on, and can be followed or exported.
 */
export function describeFailure(err: unknown, json: boolean, errorContext: Record<string, string>): string {
  if (json) return `${JSON.stringify({ error: errorReport(err), ...errorContext, exitCode: exitCodeOf(err) })}\n`;
  const about = errorContext.batchId ? `batch ${errorContext.batchId}: ` : '';
  return `lenstack: ${about}${humanMessage(err)}\n`;
}

/** What a command passes where a failure must be written as main would (an output file's interrupt). */
export function failureWriter(io: { json: boolean; stderr: NodeJS.WritableStream; errorContext: Record<string, string> }): (err: unknown) => void {
  return (err) => io.stderr.write(describeFailure(err, io.json, io.errorContext));
}

function errorReport(err: unknown) {
  if (err instanceof LenstackError) return { code: err.code, message: err.message, status: err.status, requestId: err.requestId, ...(err.credits ? { credits: err.credits } : {}) };
  if (err instanceof CliError) return { code: 'USAGE', message: err.message };
  return { code: 'CLI_FAULT', message: err instanceof Error ? err.message : String(err) };
}

function humanMessage(err: unknown): string {
  if (err instanceof LenstackError) {
    const hint =
      err.code === 'AUTH_FAILED' ? '\nCheck LENSTACK_API_KEY.' :
      err.code === 'PLAN_LIMIT_EXCEEDED' && err.credits ? `\nNeeded ${err.credits.needed} credits, ${err.credits.total} available.` :
      err.code === 'NETWORK_ERROR' ? '\nIs the API running at LENSTACK_BASE_URL?' : '';
    return `${err.message} (${err.code}${err.status ? ` ${err.status}` : ''}, request ${err.requestId})${hint}`;
  }
  if (err instanceof CliError) return err.message;
  return err instanceof Error ? (err.stack ?? err.message) : String(err);
}
