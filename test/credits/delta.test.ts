import { describe, expect, it } from 'vitest';
import { firstCopies, planAnalysis, planVehicleReport } from '../../credits/delta.ts';

describe('the billing delta (credits/delta.ts)', () => {
  it('runs only the lenses the projection lacks, bills the billable ones, and a repeated photo rides along', () => {
    const plan = planAnalysis({
      sha256s: ['a', 'b', 'a'],
      lenses: ['dating', 'describe', 'moderation'],
      billable: ['dating', 'describe'],
      cached: { a: ['dating'], b: [] },
      extraCredits: 0,
    });
    expect(plan).toEqual({
      plans: [
        { ran: ['describe', 'moderation'], billed: ['describe'], first: true, source: 0 },
        { ran: ['dating', 'describe', 'moderation'], billed: ['dating', 'describe'], first: true, source: 1 },
        { ran: [], billed: [], first: false, source: 0 },
      ],
      needed: 3,
    });
  });

  it('adds flat extras (an extraction) even when everything is cached', () => {
    const plan = planAnalysis({ sha256s: ['a'], lenses: ['dating'], billable: ['dating'], cached: { a: ['dating'] }, extraCredits: 5 });
    expect(plan.needed).toBe(5);
    expect(plan.plans[0]!.ran).toEqual([]);
  });

  it('a vehicle report describes each new photo once and reuses the ones the registry holds', () => {
    expect(firstCopies(['x', 'y', 'x', 'z'])).toEqual([0, 1, 0, 3]);
    const plan = planVehicleReport({ sha256s: ['x', 'y', 'x', 'z'], known: { y: { damage: [] } }, credits: 1 });
    expect(plan).toEqual({ sources: [0, 1, 0, 3], todo: ['x', 'z'], known: { y: { damage: [] } }, needed: 1 });
  });
});
