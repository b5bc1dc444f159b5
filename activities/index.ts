import { createHash } from 'node:crypto';
import { ApplicationFailure, Context } from '@temporalio/activity';
import type { Config } from '../core/config.ts';
import { AppError } from '../core/errors.ts';
import { release, reserve, settle, settleIn } from '../credits/ledger.ts';
import { inTransaction, type Db } from '../db/pool.ts';
import type { WorkerMetrics } from '../metrics/worker.ts';
import { fingerprint } from '../images/fingerprint.ts';
import type { BlobStore } from '../images/blobstore.ts';
import { planVendorCall } from './vendor-call.ts';
import { saveBespokeSchema } from '../bespoke/repository.ts';
import { lensOutputs, saveVehicleReport } from '../registry/vehicle-reports.ts';
import type { BespokeSchema } from '../bespoke/schema.ts';
import { cachedLenses, persistAnalysis, persistAnalysisIn, type PersistImage, type Persisted } from '../registry/photos.ts';
import { VendorError } from '../vendors/errors.ts';
import type { VisionClient } from '../vendors/types.ts';
import { planDelta } from '../workflows/plan.ts';
import type { Vendor, VendorCallInput, VendorCallResult } from '../workflows/types.ts';
import { VENDOR_INVALID_OUTPUT, VENDOR_NOT_CONFIGURED, VENDOR_REJECTED } from '../workflows/types.ts';

export interface ActivityDeps {
  config: Config;
  db: Db;
  blobs: BlobStore;
  vision: Map<Vendor, VisionClient>;
  /** Vendor-call and credit counters (metrics/worker.ts); absent in tests that do not read them. */
  metrics?: WorkerMetrics;
}

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

/** Our domain errors cross into Temporal as non-retryable failures typed by their code. */
function rethrowDomain(err: unknown): never {
  if (err instanceof AppError) {
    throw ApplicationFailure.create({
      message: err.message,
      type: err.code,
      nonRetryable: !err.retryable,
      details: err.details ? [err.details] : [],
    });
  }
  throw err;
}

/** Which lenses ran together in one vendor call (stored on each lens record). */
export function coRunHash(lenses: string[]): string {
  return createHash('sha256').update([...lenses].sort().join(',')).digest('hex').slice(0, 16);
}

/** Activities are built from their dependencies once per worker (STYLE.md). */
export function createActivities(deps: ActivityDeps) {
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

  /** A reservation made (or found again by a retry): counted and logged. */
  function countReserved(reservationId: string, amount: number): void {
    deps.metrics?.reservations.inc({ event: 'reserved' });
    deps.metrics?.credits.inc({ event: 'reserved' }, amount);
    Context.current().log.info('credits reserved', { reservationId, amount });
  }

  /** A reservation of `amount` just settled for `charge`, the rest refunded: counted and logged. */
  function countSettled(reservationId: string, amount: number, charge: number): void {
    const refunded = amount - charge;
    deps.metrics?.reservations.inc({ event: 'settled' });
    deps.metrics?.credits.inc({ event: 'settled' }, charge);
    deps.metrics?.credits.inc({ event: 'refunded' }, refunded);
    Context.current().log.info('credits settled', { reservationId, charged: charge, refunded });
  }

  async function callVendorOnce(v: Vendor, input: VendorCallInput): Promise<VendorCallResult> {
    const client = deps.vision.get(v);
    if (!client) throw ApplicationFailure.nonRetryable(`${v} is not configured on this worker`, VENDOR_NOT_CONFIGURED);
    const ctx = Context.current();
    const image = await deps.blobs.get(input.sha256);
    const call = planVendorCall(input);
    // Heartbeats let Temporal notice a dead worker within the heartbeat timeout.
    const beat = setInterval(() => ctx.heartbeat(), 1000);
    let res;
    try {
      res = await client.analyze({ image, system: call.system, prompt: call.prompt, schemaName: call.schemaName, jsonSchema: call.jsonSchema, signal: ctx.cancellationSignal });
    } catch (err) {
      if (err instanceof VendorError && !err.retryable) {
        throw ApplicationFailure.nonRetryable(`${v}: ${err.message}`, err.kind === 'invalid_output' ? VENDOR_INVALID_OUTPUT : VENDOR_REJECTED);
      }
      // An image that passed intake but cannot be prepared for the vendor (IMAGE_INVALID): the
      // same bytes fail for every attempt and every vendor.
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
    };
  }

  return {
    async fingerprintImage(input: { sha256: string }): Promise<{ pHash: string; dHash: string }> {
      const bytes = await deps.blobs.get(input.sha256);
      const fp = await fingerprint(bytes).catch(rethrowDomain);
      return { pHash: fp.pHash, dHash: fp.dHash };
    },

    async cachedLenses(input: { userId: string; sha256s: string[]; lenses: string[] }): Promise<Record<string, string[]>> {
      return cachedLenses(deps.db, input);
    },

    async reserveCredits(input: { id: string; userId: string; amount: number; ttlMs: number; workflowId: string }): Promise<void> {
      const held = await reserve(deps.db, { ...input, reason: 'analyze' }).catch(rethrowDomain);
      countReserved(input.id, held.amount);
    },

    /**
     * The delta and its reservation in one step: reads which requested lenses the caller's
     * projection holds, plans the delta (workflows/plan.ts) and reserves what it bills plus
     * `extraCredits`. One local activity instead of two: a workflow-task round trip less on every
     * fresh analysis. Idempotent by reservation id (a retry finds the reservation it made).
     */
    async reserveDelta(input: {
      reservationId: string;
      userId: string;
      workflowId: string;
      ttlMs: number;
      sha256s: string[];
      lenses: string[];
      billable: string[];
      refresh: boolean;
      extraCredits: number;
    }): Promise<{ cached: Record<string, string[]>; needed: number }> {
      const unique = [...new Set(input.sha256s)];
      const cached = input.refresh
        ? Object.fromEntries(unique.map((s) => [s, [] as string[]]))
        : await cachedLenses(deps.db, { userId: input.userId, sha256s: unique, lenses: input.lenses });
      const needed = planDelta({ sha256s: input.sha256s, lenses: input.lenses, billable: input.billable, cached }).needed + input.extraCredits;
      if (needed > 0) {
        const { reservationId: id, userId, ttlMs, workflowId } = input;
        const held = await reserve(deps.db, { id, userId, amount: needed, ttlMs, workflowId, reason: 'analyze' }).catch(rethrowDomain);
        countReserved(input.reservationId, held.amount);
      }
      return { cached, needed };
    },

    /**
     * Persist the analysis and settle its reservation in one transaction: the records and the
     * charge for them commit together or not at all. Exactly once per workflow id: a retry finds
     * the run persisted and the reservation closed, and reports the first run's figures.
     */
    async persistAndSettle(input: {
      workflowId: string;
      requestId: string;
      userId: string;
      refresh: boolean;
      images: Array<Omit<PersistImage, 'coRunHash'> & { lenses: string[] }>;
      /** The reservation to settle (none when nothing was billable), charged what persisting found new plus `extraCharge`. */
      settle: { reservationId: string; extraCharge: number } | null;
    }): Promise<Persisted> {
      const { persisted, closed, charge } = await inTransaction(deps.db, async (c) => {
        const persisted = await persistAnalysisIn(c, {
          workflowId: input.workflowId,
          requestId: input.requestId,
          userId: input.userId,
          refresh: input.refresh,
          images: input.images.map(({ lenses, ...img }) => ({ ...img, coRunHash: coRunHash(lenses) })),
        });
        if (!input.settle) return { persisted, closed: null, charge: 0 };
        const charge = persisted.charged + input.settle.extraCharge;
        return { persisted, closed: await settleIn(c, { id: input.settle.reservationId, charge }), charge };
      });
      if (closed?.applied && closed.reservation) countSettled(input.settle!.reservationId, closed.reservation.amount, charge);
      return persisted;
    },

    async settleCredits(input: { id: string; charge: number }): Promise<void> {
      const out = await settle(deps.db, input);
      if (!out.applied || !out.reservation) return; // settled before (a retry): counted then
      countSettled(input.id, out.reservation.amount, input.charge);
    },

    async releaseCredits(input: { id: string; reason: string }): Promise<void> {
      const out = await release(deps.db, input);
      if (!out.applied || !out.reservation) return;
      deps.metrics?.reservations.inc({ event: 'released' });
      deps.metrics?.credits.inc({ event: 'released' }, out.reservation.amount);
      Context.current().log.info('credits released', { reservationId: input.id, amount: out.reservation.amount, reason: input.reason });
    },

    async persistAnalysis(input: {
      workflowId: string;
      requestId: string;
      userId: string;
      refresh: boolean;
      images: Array<Omit<PersistImage, 'coRunHash'> & { lenses: string[] }>;
    }): Promise<{ applied: boolean; charged: number; chargedPerImage: number[] }> {
      return persistAnalysis(deps.db, {
        workflowId: input.workflowId,
        requestId: input.requestId,
        userId: input.userId,
        refresh: input.refresh,
        images: input.images.map(({ lenses, ...img }) => ({ ...img, coRunHash: coRunHash(lenses) })),
      });
    },

    async saveBespokeSchema(input: { userId: string; schema: Record<string, unknown>; prompt: string | null }): Promise<string> {
      return saveBespokeSchema(deps.db, { userId: input.userId, schema: input.schema as unknown as BespokeSchema, prompt: input.prompt });
    },

    async lensOutputs(input: { userId: string; sha256s: string[]; lens: string }): Promise<Record<string, Record<string, unknown>>> {
      return lensOutputs(deps.db, input.userId, input.sha256s, input.lens);
    },

    async saveVehicleReport(input: Parameters<typeof saveVehicleReport>[1]): Promise<string> {
      return saveVehicleReport(deps.db, input);
    },

    callOpenAI: (input: VendorCallInput) => callVendor('openai', input),
    callAnthropic: (input: VendorCallInput) => callVendor('anthropic', input),
    callGoogle: (input: VendorCallInput) => callVendor('google', input),
  };
}

export type Activities = ReturnType<typeof createActivities>;
