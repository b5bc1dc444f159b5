import sharp from 'sharp';
import { MockActivityEnvironment } from '@temporalio/testing';
import { DefaultLogger } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { vendorActivities } from '../../activities/vendors.ts';
import { corruptImage } from '../../core/errors.ts';
import { FsBlobStore } from '../../images/blobstore.ts';
import { createWorkerMetrics } from '../../metrics/worker.ts';
import { startSimVendor } from '../../tools/sim/index.ts';
import { createVisionClients } from '../../vendors/index.ts';
import { makeWorkCopy } from '../../vendors/resize.ts';
import type { WorkCopies } from '../../vendors/work-copies.ts';
import type { PhotoHashes, VendorCallInput, VendorCallResult } from '../../workflows/types.ts';
import { testConfig } from '../harness/env.ts';

/**
 * A photo new to the registry has its hashes made while the vendor answers (docs/decisions.md,
 * "Hashes while the vendor answers"). The call goes out before they are made, and a hash failure
 * never fails an answered call: Temporal would retry the attempt and the vendor be paid twice. The
 * answer goes back without hashes; the workflow's hashes step makes them or refuses the photo.
 */
let sim: Awaited<ReturnType<typeof startSimVendor>>;
let acts: ReturnType<typeof vendorActivities>;
let hashesOf: (sha256: string) => Promise<PhotoHashes>;
const env = new MockActivityEnvironment(undefined, { logger: new DefaultLogger('ERROR') });
const SHA = 'c'.repeat(64);
const input: VendorCallInput = { userId: 'acct', sha256: SHA, task: { kind: 'lenses', lenses: ['dating'] }, fingerprint: true };

beforeAll(async () => {
  sim = await startSimVendor({ port: 0 });
  const config = testConfig({ SIM_VENDOR_URL: sim.url });
  const photo = await sharp({ create: { width: 320, height: 240, channels: 3, background: { r: 90, g: 140, b: 200 } } }).jpeg().toBuffer();
  const copy = await makeWorkCopy(photo, 'openai');
  // The real copy; the hashes as each test makes them.
  const workCopies: WorkCopies = {
    get: async () => copy,
    hashes: (sha256) => hashesOf(sha256),
    withHashes: async (sha256) => ({ copy, hashes: await hashesOf(sha256) }),
    async copyThenHashes(sha256) {
      const made = hashesOf(sha256);
      made.catch(() => {});
      return { copy, hashes: made };
    },
  };
  const vision = new Map(createVisionClients(config).clients.map((c) => [c.vendor, c]));
  acts = vendorActivities({ config, db: null as never, blobs: new FsBlobStore(config.BLOB_DIR), vision, metrics: createWorkerMetrics(), workCopies });
});
afterAll(async () => {
  await sim?.close();
});

const callOpenAI = () => env.run(acts.callOpenAI, input) as Promise<VendorCallResult>;
const openaiCalls = () => sim.stats().openai.calls;

describe('the hashes of a new photo, made while the vendor answers', () => {
  it('the vendor is called before the hashes are made, and the answer carries them once they are', async () => {
    let finish!: (h: PhotoHashes) => void;
    let callsWhenAsked = -1;
    hashesOf = () => {
      callsWhenAsked = openaiCalls();
      return new Promise((resolve) => (finish = resolve));
    };
    const before = openaiCalls();
    const answered = sim.stats().openai.succeeded;
    const result = callOpenAI();
    // The hashes are still under way when the vendor's answer has come in.
    await expect.poll(() => sim.stats().openai.succeeded).toBe(answered + 1);
    expect(callsWhenAsked).toBe(before);
    finish({ pHash: '0123456789abcdef', dHash: 'fedcba9876543210' });
    const r = await result;
    expect(r.hashes).toEqual({ pHash: '0123456789abcdef', dHash: 'fedcba9876543210' });
    expect(r.outputs).toHaveProperty('dating');
    expect(openaiCalls()).toBe(before + 1);
  });

  it('a fingerprint that fails after the answer leaves the call answered, without hashes, and the vendor called once', async () => {
    hashesOf = async () => Promise.reject(corruptImage(new Error('thumbnail damaged')));
    const before = openaiCalls();
    const r = await callOpenAI();
    expect(r.outputs).toHaveProperty('dating');
    expect(r).not.toHaveProperty('hashes');
    expect(openaiCalls()).toBe(before + 1);
  });
});
