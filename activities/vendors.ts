import { ApplicationFailure, Context } from '@temporalio/activity';
import { AppError } from '../core/errors.ts';
import { VendorError } from '../vendors/errors.ts';
import type { PhotoHashes, Vendor, VendorCallInput, VendorCallResult } from '../workflows/types.ts';
import { VENDOR_INVALID_OUTPUT, VENDOR_NOT_CONFIGURED, VENDOR_REJECTED } from '../workflows/types.ts';
import { rethrowDomain, type ActivityDeps } from './deps.ts';
import { planVendorCall } from './vendor-call.ts';

const FAILURE_KIND: Record<string, string> = {
  [VENDOR_REJECTED]: 'rejected',
  [VENDOR_INVALID_OUTPUT]: 'invalid_output',
  [VENDOR_NOT_CONFIGURED]: 'not_configured',
};

/** How a vendor call attempt failed, for metrics and logs (aborted = cancelled, timed out or worker shutdown). */
function failureKind(err: unknown, aborted: boolean): string {
  if (err instanceof VendorError) return err.aborted || aborted ? 'aborted' : err.kind;
  if (err instanceof ApplicationFailure && err.type && FAILURE_KIND[err.type]) return FAILURE_KIND[err.type]!;
  return aborted ? 'aborted' : 'error';
}

/** How much earlier than Temporal's start-to-close timeout an attempt gives up on its vendor. */
const ATTEMPT_MARGIN_MS = 500;

/** One activity per vendor, so the Temporal UI and the retry policy see which vendor a call went to. */
export function vendorActivities(deps: ActivityDeps) {
  /** One vendor call attempt, counted and logged (the context logger adds workflowId, activityType, attempt). */
  async function callVendor(v: Vendor, input: VendorCallInput): Promise<VendorCallResult> {
    const ctx = Context.current();
    const task = input.task.kind;
    const timer = deps.metrics?.vendorDuration.startTimer();
    deps.metrics?.vendorCalls.inc({ vendor: v, task });
    ctx.log.info('vendor call started', { vendor: v, task });
    try {
      const result = await callVendorOnce(v, input);
      const seconds = timer?.({ vendor: v, outcome: 'ok' });
      ctx.log.info('vendor call succeeded', { vendor: v, task, model: result.model, inputTokens: result.inputTokens, outputTokens: result.outputTokens, ...(seconds !== undefined ? { durationMs: Math.round(seconds * 1000) } : {}) });
      return result;
    } catch (err) {
      const kind = failureKind(err, ctx.cancellationSignal.aborted);
      deps.metrics?.vendorFailures.inc({ vendor: v, task, kind });
      const seconds = timer?.({ vendor: v, outcome: kind });
      ctx.log.warn('vendor call failed', { vendor: v, task, kind, message: (err as Error).message, ...(seconds !== undefined ? { durationMs: Math.round(seconds * 1000) } : {}) });
      throw err;
    }
  }

  async function callVendorOnce(v: Vendor, input: VendorCallInput): Promise<VendorCallResult> {
    const client = deps.vision.get(v);
    if (!client) throw ApplicationFailure.nonRetryable(`${v} is not configured on this worker`, VENDOR_NOT_CONFIGURED);
    const ctx = Context.current();
    const started = Date.now();
    // The call ends at this attempt's own deadline (a little before Temporal's), so a vendor that
    // hangs fails this attempt as unavailable and the retry or the next vendor gets the time left.
    const deadline = AbortSignal.timeout(Math.max(250, ctx.info.startToCloseTimeoutMs - ATTEMPT_MARGIN_MS));
    const signal = AbortSignal.any([ctx.cancellationSignal, deadline]);
    let phase = 'reading image';
    const call = planVendorCall(input);
    // Heartbeats say the worker is alive and where the attempt is, every second from the first
    // (the heartbeat timeout counts from the start until then, so a call that ends sooner costs
    // no heartbeat round trip); they stop with the attempt's deadline, so a hung call never looks
    // alive past it.
    const beat = setInterval(() => {
      if (!signal.aborted) ctx.heartbeat({ phase, elapsedMs: Date.now() - started });
    }, 1000);
    let res;
    let hashes: PhotoHashes | undefined;
    try {
      // A photo new to the caller's registry: its hashes come from the same read as the copy.
      let image;
      if (input.fingerprint) ({ copy: image, hashes } = await deps.workCopies.withHashes(input.sha256));
      else image = await deps.workCopies.get(input.sha256);
      phase = 'awaiting the vendor';
      res = await client.analyze({ image, system: call.system, prompt: call.prompt, schemaName: call.schemaName, jsonSchema: call.jsonSchema, signal });
    } catch (err) {
      if (err instanceof VendorError && !err.retryable) {
        throw ApplicationFailure.nonRetryable(`${v}: ${err.message}`, err.kind === 'invalid_output' ? VENDOR_INVALID_OUTPUT : VENDOR_REJECTED);
      }
      // An image that passed intake but cannot be decoded or prepared for the vendor
      // (IMAGE_INVALID): the same bytes fail for every attempt and every vendor.
      if (err instanceof AppError) rethrowDomain(err);
      throw err; // transient: the activity retry policy handles it
    } finally {
      clearInterval(beat);
    }
    const checked = call.validate(res.json);
    if (!checked.ok) {
      throw ApplicationFailure.nonRetryable(`${v} answered outside the requested schema: ${checked.errors.slice(0, 3).join('; ')}`, VENDOR_INVALID_OUTPUT);
    }
    return {
      outputs: checked.outputs,
      ...(checked.data ? { data: checked.data } : {}),
      versions: call.versions,
      vendor: v,
      model: res.model,
      provider: res.provider,
      simulated: res.simulated,
      promptHash: call.promptHash,
      inputTokens: res.inputTokens,
      outputTokens: res.outputTokens,
      ...(hashes ? { hashes } : {}),
    };
  }

  return {
    callOpenAI: (input: VendorCallInput) => callVendor('openai', input),
    callAnthropic: (input: VendorCallInput) => callVendor('anthropic', input),
    callGoogle: (input: VendorCallInput) => callVendor('google', input),
  };
}
