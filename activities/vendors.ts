import { createHash } from 'node:crypto';
import { ApplicationFailure, Context } from '@temporalio/activity';
import { AppError } from '../core/errors.ts';
import { VENDOR_ACTIVITY, VENDOR_NAMES, type VendorActivityName } from '../core/vendor-names.ts';
import { BudgetUnavailable, BudgetWaitTooLong } from '../vendors/budget.ts';
import { isStackName } from '../lenses/stacks.ts';
import { VendorError } from '../vendors/errors.ts';
import { VENDOR_REGISTRY } from '../vendors/registry.ts';
import type { VendorUsage } from '../vendors/types.ts';
import { billedSize, imageTokens, isPrepared, prepareImage, type PreparedImage, type WorkCopy } from '../vendors/resize.ts';
import type { PhotoHashes, PreparedUpload, Vendor, VendorCallInput, VendorCallResult } from '../workflows/types.ts';
import { VENDOR_INVALID_OUTPUT, VENDOR_NOT_CONFIGURED, VENDOR_QUOTA, VENDOR_REJECTED } from '../workflows/types.ts';
import { rethrowDomain, type ActivityDeps } from './deps.ts';
import { planVendorCall } from './vendor-call.ts';

const FAILURE_KIND: Record<string, string> = {
  [VENDOR_REJECTED]: 'rejected',
  [VENDOR_INVALID_OUTPUT]: 'invalid_output',
  [VENDOR_NOT_CONFIGURED]: 'not_configured',
  [VENDOR_QUOTA]: 'quota_wait',
};

/** How a vendor call attempt failed, for metrics and logs (aborted = cancelled, timed out or worker shutdown). */
function failureKind(err: unknown, aborted: boolean): string {
  if (err instanceof VendorError) return err.aborted || aborted ? 'aborted' : err.kind;
  if (err instanceof ApplicationFailure && err.type && FAILURE_KIND[err.type]) return FAILURE_KIND[err.type]!;
  return aborted ? 'aborted' : 'error';
}

/** How much earlier than Temporal's start-to-close timeout an attempt gives up on its vendor. */
const ATTEMPT_MARGIN_MS = 500;

/** Answer tokens a call is assumed to use until it answered (its real use then corrects the budget). */
const OUTPUT_TOKENS_ESTIMATE = 1000;

/**
 * Tokens a call will bill, for the vendor budget before it is made: the image at the size the
 * vendor bills (vendors/resize.ts), the text at ~4 characters a token, and an answer's guess.
 */
export function estimateCallTokens(v: Vendor, image: Buffer | WorkCopy | PreparedImage, text: string): number {
  let tokens = 1000;
  if (isPrepared(image)) tokens = image.tokens;
  else if (!Buffer.isBuffer(image)) {
    // Billed by the original's size (a copy made for another vendor may be larger or smaller).
    const size = billedSize(v, image.source.width, image.source.height);
    tokens = imageTokens(v, size.width, size.height);
  }
  return tokens + Math.ceil(text.length / 4) + OUTPUT_TOKENS_ESTIMATE;
}

/** One activity per vendor, so the Temporal UI and the retry policy see which vendor a call went to. */
export function vendorActivities(deps: ActivityDeps) {
  /** One vendor call attempt, counted and logged (the context logger adds workflowId, activityType, attempt). */
  async function callVendor(v: Vendor, input: VendorCallInput): Promise<VendorCallResult> {
    const ctx = Context.current();
    const task = input.task.kind;
    const timer = deps.metrics.vendorDuration.startTimer();
    deps.metrics.vendorCalls.inc({ vendor: v, task });
    ctx.log.info('vendor call started', { vendor: v, task });
    try {
      const result = await callVendorOnce(v, input);
      const seconds = timer?.({ vendor: v, outcome: 'ok' });
      ctx.log.info('vendor call succeeded', { vendor: v, task, model: result.model, inputTokens: result.inputTokens, outputTokens: result.outputTokens, ...(seconds !== undefined ? { durationMs: Math.round(seconds * 1000) } : {}) });
      return result;
    } catch (err) {
      const kind = failureKind(err, ctx.cancellationSignal.aborted);
      deps.metrics.vendorFailures.inc({ vendor: v, task, kind });
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
    let slot: { grantedAt: number; estimatedTokens: number } | null = null;
    let hashes: PhotoHashes | undefined;
    let hashing: Promise<PhotoHashes> | undefined;
    let ahead: Promise<PreparedUpload | undefined> | undefined;
    let preparedAhead: PreparedUpload | undefined;
    try {
      // Prepared during an earlier call of the chain, for this vendor: its upload as it was made.
      const prepared = input.prepared?.vendor === v && input.prepared.sha256 === input.sha256 ? await readPrepared(input.prepared) : null;
      let image: Buffer | WorkCopy | PreparedImage;
      if (prepared) {
        image = prepared.image;
        if (input.fingerprint) hashes = prepared.hashes ?? (await deps.workCopies.hashes(input.sha256));
      } else if (input.fingerprint) {
        // A photo new to the caller's registry: its hashes come from the same read as the copy,
        // made while the vendor answers and awaited after it (docs/decisions.md, "Hashes while the vendor answers").
        ({ copy: image, hashes: hashing } = await deps.workCopies.copyThenHashes(input.sha256, v));
      } else {
        image = await deps.workCopies.get(input.sha256, v);
      }
      // The chain's next photo is prepared while this call waits for the vendor: its own call then
      // starts with its upload made (docs/decisions.md, "A vehicle's next photo prepared during the call").
      if (input.ahead) ahead = prepareAhead(v, input.ahead);
      phase = 'waiting for the vendor budget';
      slot = await takeSlot(v, input, image, call, signal, started);
      phase = 'awaiting the vendor';
      res = await client.analyze({ image, system: call.system, prompt: call.prompt, schemaName: call.schemaName, jsonSchema: call.jsonSchema, signal });
      // The hashes made while the vendor answered, awaited here so the heartbeats go on while a
      // slow one (a HEIC's full decode) finishes. A hash failure never fails an answered call:
      // retrying would pay the vendor again. The answer goes back without them, and the workflow's
      // own hashes step makes them, or refuses the photo (IMAGE_INVALID) with no vendor call.
      if (hashing) {
        phase = 'fingerprinting the photo';
        hashes = await hashing.catch(() => undefined);
      }
      // Usually made long before the answer came; never rejects (undefined when it could not be
      // made). Awaited here, so the heartbeats go on while a slow one finishes.
      if (ahead) {
        phase = 'preparing the next photo';
        preparedAhead = await ahead;
      }
    } catch (err) {
      // An answer we refuse (not JSON, truncated, refused) was billed all the same: its tokens count
      // in the metrics and against the vendor's budget as a kept answer's do.
      if (err instanceof VendorError && err.usage) {
        recordTokens(v, client.model, input, err.usage);
        const usedTokens = VENDOR_REGISTRY[v].limitedTokens(err.usage);
        if (slot) await budgetStep(() => deps.budget!.settle(v, { estimatedTokens: slot!.estimatedTokens, usedTokens }));
      }
      // The vendor said its limits are spent: every worker's budget shrinks and pauses at once.
      if (err instanceof VendorError && err.status === 429) deps.metrics.vendorThrottled.inc({ vendor: v });
      if (slot && err instanceof VendorError && err.status === 429) await budgetStep(() => deps.budget!.throttled(v, { retryAfterMs: err.retryAfterMs, grantedAt: slot!.grantedAt }));
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
    // Billed by the vendor whatever our check of the answer says below.
    recordTokens(v, client.model, input, res);
    if (slot) {
      const used = { estimatedTokens: slot.estimatedTokens, usedTokens: VENDOR_REGISTRY[v].limitedTokens(res) };
      await budgetStep(() => deps.budget!.settle(v, used));
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
      ...(preparedAhead ? { preparedAhead } : {}),
    };
  }

  /** An upload prepared ahead, read back from the blob store; null when it is gone (the call then decodes the photo). */
  async function readPrepared(p: PreparedUpload): Promise<{ image: PreparedImage; hashes?: PhotoHashes } | null> {
    try {
      const data = await deps.blobs.get(p.blob);
      deps.metrics.preparedUploads.inc({ outcome: 'used' });
      return { image: { data, mimeType: 'image/jpeg', width: p.width, height: p.height, tokens: p.tokens, source: p.source }, ...(p.hashes ? { hashes: p.hashes } : {}) };
    } catch {
      deps.metrics.preparedUploads.inc({ outcome: 'missed' });
      return null;
    }
  }

  /**
   * The next photo's upload for this vendor, made from its work copy for this vendor (vendors/resize.ts,
   * the same bytes its own call would make) and stored under its own hash, with the photo's hashes when
   * asked. Unreferenced, it is the collector's after BLOB_GC_GRACE_MS, which outlasts any run.
   * Never rejects: a photo that cannot be prepared is its own call's to decode and refuse.
   */
  async function prepareAhead(v: Vendor, next: NonNullable<VendorCallInput['ahead']>): Promise<PreparedUpload | undefined> {
    try {
      const { copy, hashes } = next.fingerprint ? await deps.workCopies.withHashes(next.sha256, v) : { copy: await deps.workCopies.get(next.sha256, v), hashes: undefined };
      const upload = await prepareImage(v, copy);
      const blob = createHash('sha256').update(upload.data).digest('hex');
      await deps.blobs.put(blob, upload.data);
      deps.metrics.preparedUploads.inc({ outcome: 'made' });
      return { sha256: next.sha256, vendor: v, blob, width: upload.width, height: upload.height, tokens: upload.tokens, source: upload.source, ...(hashes ? { hashes } : {}) };
    } catch {
      deps.metrics.preparedUploads.inc({ outcome: 'failed' });
      return undefined;
    }
  }

  /** What the call billed, in the vendor's usage terms (vendors/types.ts VendorUsage), the kept answers' and the refused ones'. */
  function recordTokens(v: Vendor, model: string, input: VendorCallInput, res: VendorUsage): void {
    const m = deps.metrics;
    if (!m) return;
    const task = input.task.kind;
    const stack = task === 'vehicle-photo' || task === 'vehicle-report' ? 'vehicle-condition' : isStackName(input.stack) ? input.stack : 'none';
    const labels = { vendor: v, model, task, stack };
    m.vendorTokens.observe({ ...labels, kind: 'input' }, res.inputTokens);
    m.vendorTokens.observe({ ...labels, kind: 'cached_input' }, res.cachedInputTokens);
    m.vendorTokens.observe({ ...labels, kind: 'cache_write_input' }, res.cacheWriteInputTokens);
    m.vendorTokens.observe({ ...labels, kind: 'output' }, res.outputTokens);
  }

  /**
   * A slot in the vendor's budget before the call (none when the worker has no budget). The wait
   * heartbeats like the call (the interval above), ends with the activity's cancellation, and
   * takes at most half the attempt: then the attempt fails VENDOR_QUOTA without calling the
   * vendor, and the workflow decides whether to wait again or overflow (workflows/steps.ts).
   */
  async function takeSlot(v: Vendor, input: VendorCallInput, image: Buffer | WorkCopy | PreparedImage, call: ReturnType<typeof planVendorCall>, signal: AbortSignal, started: number) {
    const budget = deps.budget;
    if (!budget) return null;
    const ctx = Context.current();
    const estimatedTokens = estimateCallTokens(v, image, call.system + call.prompt + JSON.stringify(call.jsonSchema));
    const lane = input.lane ?? 'interactive';
    const waitFor = Math.max(0, (ctx.info.startToCloseTimeoutMs - ATTEMPT_MARGIN_MS) / 2 - (Date.now() - started));
    // AbortSignal.timeout takes whole milliseconds (half an odd attempt deadline is not one).
    const waitOver = AbortSignal.timeout(Math.max(1, Math.floor(waitFor)));
    const waitStarted = Date.now();
    try {
      // With somewhere else to go (VENDOR_OVERFLOW), a wait that cannot end in time is given up at once.
      const d = await budget.acquire(v, lane, estimatedTokens, AbortSignal.any([signal, waitOver]), input.overflow ? { giveUpAt: waitStarted + waitFor } : {});
      const waited = Date.now() - waitStarted;
      deps.metrics.vendorBudgetWait.observe({ vendor: v, lane }, waited / 1000);
      return { grantedAt: d.now, estimatedTokens };
    } catch (err) {
      if (err instanceof BudgetUnavailable) {
        deps.onBudgetOutage?.(err);
        return null; // fail open: the vendor's own 429s still bound us
      }
      if (err instanceof BudgetWaitTooLong || (waitOver.aborted && !signal.aborted)) {
        deps.metrics.vendorBudgetWait.observe({ vendor: v, lane }, (Date.now() - waitStarted) / 1000);
        throw ApplicationFailure.create({ message: `${v}: no slot in the vendor's budget within ${Math.round(waitFor)} ms`, type: VENDOR_QUOTA, nonRetryable: true });
      }
      throw err;
    }
  }

  /** Budget bookkeeping after a call: never fails the call (a Redis outage only loses the correction). */
  async function budgetStep(step: () => Promise<void>): Promise<void> {
    try {
      await step();
    } catch (err) {
      deps.onBudgetOutage?.(err as Error);
    }
  }

  // One activity per vendor, named in core/vendor-names.ts (recorded histories name them).
  return Object.fromEntries(
    VENDOR_NAMES.map((v) => [VENDOR_ACTIVITY[v], (input: VendorCallInput) => callVendor(v, input)]),
  ) as Record<VendorActivityName, (input: VendorCallInput) => Promise<VendorCallResult>>;
}
