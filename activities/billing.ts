import { createHash } from 'node:crypto';
import { ApplicationFailure, Context } from '@temporalio/activity';
import { planAnalysis, planVehicleReport, type AnalysisPlan, type VehiclePlan } from '../credits/delta.ts';
import { countUnbilledCallsIn, holdIn, refuseDeletedIn, release, settleIn, type Reservation, type UnbilledGate } from '../credits/ledger.ts';
import { inTransaction, type DbClient } from '../db/pool.ts';
import { persistAnalysisIn, runStartIn, type Persisted } from '../registry/photos.ts';
import { lensOutputsIn, saveVehicleReportIn, type VehicleReportRecord } from '../registry/vehicle-reports.ts';
import { rethrowDomain, type ActivityDeps } from './deps.ts';
import type { PersistedImage, Vendor } from '../workflows/types.ts';

/** Which lenses ran together in one vendor call (stored on each lens record). */
export function coRunHash(lenses: string[]): string {
  return createHash('sha256').update([...lenses].sort().join(',')).digest('hex').slice(0, 16);
}

export type { PersistedImage };

/** A run's lens records, each image's lenses marked with the hash of those that ran together. */
function persistRun(c: DbClient, run: { workflowId: string; requestId: string; userId: string; refresh: boolean; images: PersistedImage[] }): Promise<Persisted> {
  const { workflowId, requestId, userId: accountId, refresh } = run;
  return persistAnalysisIn(c, { workflowId, requestId, accountId, refresh, images: run.images.map(({ lenses, ...img }) => ({ ...img, coRunHash: coRunHash(lenses) })) });
}

interface ReserveBase {
  reservationId: string;
  userId: string;
  workflowId: string;
  ttlMs: number;
  sha256s: string[];
  refresh: boolean;
}

/**
 * The saga's database steps. Each is one transaction, so each is exactly once however often
 * Temporal runs it: a reservation is found again by its id, a persisted run by its workflow id.
 */
export function billingActivities(deps: ActivityDeps) {
  const log = () => Context.current().log;

  /** The unbilled-call gate and the reservation of `needed` (none when 0), in the caller's transaction. */
  async function hold(c: DbClient, input: ReserveBase, gate: Omit<UnbilledGate, 'cap'>, needed: number, reason: string): Promise<Reservation | null> {
    const { reservationId: id, userId: accountId, ttlMs, workflowId } = input;
    return holdIn(c, {
      accountId,
      reservationId: id,
      gate: { ...gate, cap: deps.config.FREE_VENDOR_CALLS_PER_DAY },
      reserve: needed > 0 ? { amount: needed, ttlMs, workflowId, reason } : null,
      closed: () => finishedRun(input),
    });
  }

  function countReserved(reservationId: string, held: Reservation | null): void {
    if (!held) return;
    deps.metrics.reservations.inc({ event: 'reserved' });
    deps.metrics.credits.inc({ event: 'reserved' }, held.amount);
    log().info('credits reserved', { reservationId, amount: held.amount });
  }

  function countSettled(reservationId: string, closed: { applied: boolean; reservation: Reservation | null } | null): void {
    if (!closed?.applied || !closed.reservation) return; // settled before (a retry): counted then
    const charge = closed.reservation.settledAmount ?? 0;
    const refunded = closed.reservation.amount - charge;
    deps.metrics.reservations.inc({ event: 'settled' });
    deps.metrics.credits.inc({ event: 'settled' }, charge);
    deps.metrics.credits.inc({ event: 'refunded' }, refunded);
    log().info('credits settled', { reservationId, charged: charge, refunded });
  }

  /**
   * A run under a workflow id that already finished (Temporal forgot it and the id was started
   * again) must not run vendors against a closed reservation or an old run's records: refused
   * when the run persisted (the registry says) or its reservation is closed (the ledger says).
   */
  function finishedRun(input: ReserveBase): ApplicationFailure {
    return ApplicationFailure.nonRetryable(
      `The analysis of request ${input.workflowId.split(':').slice(2).join(':')} already finished and its answer is no longer held; send the request again with a new x-request-id`,
      'REQUEST_ID_CONFLICT',
    );
  }

  /**
   * The vendors this worker calls, in fallback order: the workflow's chain comes from here, so
   * only the worker knows which are configured. A run with vendor work and none is refused before
   * anything is reserved.
   */
  function vendorsFor(vendorWork: boolean): Vendor[] {
    const vendors = [...deps.vision.keys()];
    if (vendorWork && !vendors.length) throw ApplicationFailure.nonRetryable('No AI provider is configured', 'PROVIDER_UNAVAILABLE');
    return vendors;
  }

  return {
    /**
     * The delta of an analysis and its reservation in one transaction: which requested lenses the
     * caller's projection holds, the plan (credits/delta.ts), and the credits it bills plus
     * `extraCredits`. The workflow runs what this plan says, with the vendors it names.
     */
    async reserveDelta(input: ReserveBase & { lenses: string[]; billable: string[]; extraCredits: number }): Promise<AnalysisPlan & { vendors: Vendor[]; overflow: boolean }> {
      const { plan, held, vendors } = await inTransaction(deps.db, async (c) => {
        const unique = [...new Set(input.sha256s)];
        const start = await runStartIn(c, { workflowId: input.workflowId, accountId: input.userId, sha256s: unique, lenses: input.refresh ? [] : input.lenses });
        if (start.persisted) throw finishedRun(input);
        const cached = start.cached;
        const plan = planAnalysis({ sha256s: input.sha256s, lenses: input.lenses, billable: input.billable, cached, extraCredits: input.extraCredits });
        const calls = plan.plans.filter((p) => p.ran.length > 0 || (input.extraCredits > 0 && p.first)).length;
        const vendors = vendorsFor(calls > 0);
        const gate = { vendorWork: calls > 0, freeCalls: plan.needed === 0 ? calls : 0 };
        return { plan, held: await hold(c, input, gate, plan.needed, 'analyze'), vendors };
      }).catch(rethrowDomain);
      countReserved(input.reservationId, held);
      return { ...plan, vendors, overflow: deps.config.VENDOR_OVERFLOW };
    },

    /** The delta of a vehicle report (photos already described are reused) and its flat reservation. */
    async reserveVehicleReport(input: ReserveBase & { step: string; credits: number }): Promise<VehiclePlan & { vendors: Vendor[]; overflow: boolean }> {
      const { plan, held, vendors } = await inTransaction(deps.db, async (c) => {
        const unique = [...new Set(input.sha256s)];
        if ((await runStartIn(c, { workflowId: input.workflowId, accountId: input.userId, sha256s: [], lenses: [] })).persisted) throw finishedRun(input);
        const known = input.refresh ? {} : await lensOutputsIn(c, { accountId: input.userId, sha256s: unique, lens: input.step });
        const plan = planVehicleReport({ sha256s: input.sha256s, known, credits: input.credits });
        const vendors = vendorsFor(true);
        return { plan, held: await hold(c, input, { vendorWork: true, freeCalls: 0 }, plan.needed, 'vehicle report'), vendors };
      }).catch(rethrowDomain);
      countReserved(input.reservationId, held);
      return { ...plan, vendors, overflow: deps.config.VENDOR_OVERFLOW };
    },

    /**
     * Persist the analysis and settle its reservation in one transaction: the records and the
     * charge for them commit together or not at all. A retry finds the run persisted and the
     * reservation closed, and reports the first run's figures.
     */
    async persistAndSettle(input: {
      workflowId: string;
      requestId: string;
      userId: string;
      refresh: boolean;
      images: PersistedImage[];
      /** The reservation to settle (none when nothing was billable), charged what persisting found new plus `extraCharge`. */
      settle: { reservationId: string; extraCharge: number } | null;
    }): Promise<Persisted> {
      const { persisted, closed } = await inTransaction(deps.db, async (c) => {
        await refuseDeletedIn(c, input.userId);
        const persisted = await persistRun(c, input);
        if (!input.settle) return { persisted, closed: null };
        const charge = persisted.charged + input.settle.extraCharge;
        return { persisted, closed: await settleIn(c, { id: input.settle.reservationId, charge, lockedAccount: input.userId }) };
      }).catch(rethrowDomain);
      if (input.settle) countSettled(input.settle.reservationId, closed);
      return persisted;
    },

    /** The per-photo findings, the report and the report's charge in one transaction. */
    async persistVehicleReport(input: {
      workflowId: string;
      requestId: string;
      userId: string;
      refresh: boolean;
      images: PersistedImage[];
      report: Omit<VehicleReportRecord, 'workflowId' | 'accountId'>;
      reservationId: string;
    }): Promise<{ reportId: string }> {
      const { reportId, closed } = await inTransaction(deps.db, async (c) => {
        await refuseDeletedIn(c, input.userId);
        await persistRun(c, input);
        const reportId = await saveVehicleReportIn(c, { ...input.report, workflowId: input.workflowId, accountId: input.userId });
        return { reportId, closed: await settleIn(c, { id: input.reservationId, charge: input.report.credits, lockedAccount: input.userId }) };
      }).catch(rethrowDomain);
      countSettled(input.reservationId, closed);
      return { reportId };
    },

    /** A failed run's vendor calls were not paid for: they count against the account's daily budget. */
    async countUnbilledCalls(input: { userId: string; calls: number }): Promise<void> {
      await countUnbilledCallsIn(deps.db, { accountId: input.userId, calls: input.calls });
    },

    /** The saga's compensation: return what the reservation holds (a no-op when it is closed or was never made). */
    async releaseCredits(input: { id: string; reason: string }): Promise<void> {
      const out = await release(deps.db, input);
      if (!out.applied || !out.reservation) return;
      deps.metrics.reservations.inc({ event: 'released' });
      deps.metrics.credits.inc({ event: 'released' }, out.reservation.amount);
      log().info('credits released', { reservationId: input.id, amount: out.reservation.amount, reason: input.reason });
    },
  };
}
