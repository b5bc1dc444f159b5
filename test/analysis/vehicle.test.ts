import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createHash } from 'node:crypto';
import { getBalance } from '../../credits/ledger.ts';
import { distinctPhotos } from '../../bench/distinct-photos.ts';
import { VEHICLE_PHOTO_CONCURRENCY } from '../../analysis/vehicle.ts';
import { makeWorkCopy, prepareImage } from '../../vendors/resize.ts';
import { bearer, createTestAccount, expectEnvelope } from '../helpers/app.ts';
import { photoBase64 } from '../helpers/photos.ts';
import { startPipeline, type Pipeline } from '../helpers/pipeline.ts';

let p: Pipeline;
beforeAll(async () => {
  p = await startPipeline();
}, 120_000);
afterAll(async () => p?.close());
beforeEach(() => p.sim.reset());

const analyze = (key: string, body: Record<string, unknown>, headers: Record<string, string> = {}) =>
  p.app.inject({ method: 'POST', url: '/v1/analyze', headers: { ...bearer(key), ...headers }, payload: body });
const PHOTOS = ['gps-DSCN0010.jpg', 'gps-DSCN0012.jpg', 'gps-DSCN0021.jpg', 'orientation-landscape_1.jpg', 'Canon_40D.jpg'];
const VEHICLE = { vin: 'WVWZZZ1JZXW000001', make: 'Volkswagen', model: 'Golf', year: 1999, mileage: 184000 };
const totalCalls = () => Object.values(p.sim.stats()).reduce((n, v) => n + v.calls, 0);

describe('the vehicle-condition stack', () => {
  it('writes one report over several photos, billed 1 credit, followable step by step in Temporal', async () => {
    const user = await createTestAccount(p.db, { community: 10 });
    const res = await analyze(
      user.liveKey,
      { images: PHOTOS.map((f) => ({ base64: photoBase64(f) })), preset: 'vehicle-condition', context: { vehicle: VEHICLE } },
      { 'x-request-id': `veh-${user.userId}` },
    );
    expect(res.statusCode, res.body).toBe(200);
    const a = res.json();
    expect(a.outputSchema).toBe('vehicle');
    for (const f of ['photos', 'overallCondition', 'observations', 'componentGrades', 'accidentIndicators', 'photoQuality', 'missingViews', 'vehicleContext']) {
      expect(a.output, f).toHaveProperty(f);
    }
    expect(a.output.reportId).toMatch(/^vrp_/);
    // One photos entry per submitted photo, in order: the simulated model answers 0 to 3 entries
    // with random indexes, so this holds only because Lenstack assembles it.
    expect(a.output.photos.map((ph: { index: number }) => ph.index)).toEqual([0, 1, 2, 3, 4]);
    expect(a.usage).toMatchObject({ creditsCharged: 1, modulesUsed: ['moderation', 'vehicle-condition'] });
    expect(a.usage.inputTokens).toBeGreaterThan(0);
    expect(totalCalls()).toBe(PHOTOS.length + 1);
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 9, reserved: 0 });
    // Per-photo findings and moderation are kept per photo for later reports.
    const steps = await p.db.query(`SELECT lens, count(*)::int AS n FROM lens_records WHERE user_id = $1 GROUP BY lens ORDER BY lens`, [user.userId]);
    expect(steps.rows).toEqual([{ lens: 'moderation', n: 5 }, { lens: 'vehicle-photo', n: 5 }]);

    // An operator sees every step as a labelled activity.
    const history = await p.temporal.workflow.getHandle(`vehicle:${user.userId}:veh-${user.userId}`).fetchHistory();
    const summaries = (history.events ?? [])
      .filter((e) => e.activityTaskScheduledEventAttributes)
      .map((e) => (e.userMetadata?.summary?.data ? Buffer.from(e.userMetadata.summary.data).toString() : e.activityTaskScheduledEventAttributes!.activityType!.name!));
    // Intake fingerprinted these new photos while checking them: no fingerprint step is needed.
    expect(summaries.filter((s) => s.includes('fingerprint photo'))).toHaveLength(0);
    expect(summaries.filter((s) => /vehicle photo \d\/5/.test(s))).toHaveLength(5);
    expect(summaries.some((s) => s.includes('vehicle report over 5 photos'))).toBe(true);
  });

  it('the same photos and vehicle again are answered from the stored report for 0 credits; one new photo costs one call', async () => {
    const user = await createTestAccount(p.db, { community: 10 });
    const body = { images: PHOTOS.slice(0, 3).map((f) => ({ base64: photoBase64(f) })), preset: 'vehicle-condition', context: { vehicle: VEHICLE } };
    const first = await analyze(user.liveKey, body);
    expect(first.statusCode, first.body).toBe(200);
    p.sim.reset();
    const again = await analyze(user.liveKey, { ...body, images: [...body.images].reverse() });
    expect(again.statusCode).toBe(200);
    expect(again.json().meta.cacheHit).toBe(true);
    expect(again.json().usage.creditsCharged).toBe(0);
    expect(again.json().output.reportId).toBe(first.json().output.reportId);
    expect(totalCalls()).toBe(0);
    // The stored report speaks of this request's positions: the first photo is now the last.
    const before = first.json().output.photos as Array<{ index: number }>;
    const after = again.json().output.photos as Array<{ index: number }>;
    expect(after.map((ph) => ph.index)).toEqual([0, 1, 2]);
    expect(after.map(({ index: _i, ...rest }) => rest)).toEqual([...before].reverse().map(({ index: _i, ...rest }) => rest));

    const more = await analyze(user.liveKey, { ...body, images: [...body.images, { base64: photoBase64('Nikon_D70.jpg') }] });
    expect(more.statusCode, more.body).toBe(200);
    expect(more.json().usage.creditsCharged).toBe(1);
    expect(more.json().warnings.join(' ')).toContain('3 photo(s) already described');
    expect(totalCalls()).toBe(2);
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 8, reserved: 0 });
  });

  it('a different vehicle context is a different report', async () => {
    const user = await createTestAccount(p.db, { community: 10 });
    const images = [{ base64: photoBase64('Pentax_K10D.jpg') }];
    await analyze(user.liveKey, { images, preset: 'vehicle-condition', context: { vehicle: VEHICLE } });
    const other = await analyze(user.liveKey, { images, preset: 'vehicle-condition', context: { vehicle: { ...VEHICLE, mileage: 190000 } } });
    expect(other.json().meta.cacheHit).toBe(false);
    expect(other.json().usage.creditsCharged).toBe(1);
  });

  it('402 without a credit; 400 for modulesAdd with the stack', async () => {
    const user = await createTestAccount(p.db);
    const res = await analyze(user.liveKey, { images: [{ base64: photoBase64('xmp-no_exif.jpg') }], preset: 'vehicle-condition' });
    expect(res.statusCode).toBe(402);
    expect(expectEnvelope(res.json()).credits).toEqual({ needed: 1, community: 0, purchased: 0, total: 0, resetsInDays: 0 });
    expect(res.headers['cache-control']).toBe('no-store, private');
    const bad = await analyze(user.liveKey, { images: [{ base64: photoBase64('xmp-no_exif.jpg') }], preset: 'vehicle-condition', modulesAdd: ['dating'] });
    expect(bad.statusCode).toBe(400);
  });

  it('all vendors down → 502, the credit released', async () => {
    const user = await createTestAccount(p.db, { community: 3 });
    for (const v of ['openai', 'anthropic', 'google'] as const) p.sim.setBehaviour(v, { failRate: 1, failure: 'http500' });
    const res = await analyze(user.liveKey, { images: [{ base64: photoBase64('hdr-canon_hdr_NO.jpg') }], preset: 'vehicle-condition' });
    expect(res.statusCode).toBe(502);
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 3, reserved: 0 });
  });

  it('a sandbox key gets the flat report fixture, not one per image', async () => {
    const user = await createTestAccount(p.db);
    const res = await analyze(user.testKey, { images: PHOTOS.slice(0, 2).map((f) => ({ base64: photoBase64(f) })), preset: 'vehicle-condition' });
    expect(res.statusCode).toBe(200);
    expect(res.json().outputSchema).toBe('vehicle');
    expect(res.json().output).toHaveProperty('overallCondition');
    expect(res.json().output).not.toHaveProperty('images');
    expect(res.json().output.photos.map((ph: { index: number }) => ph.index)).toEqual([0, 1]);
  });

  it('more photos than lanes: the photos left for a free lane are prepared during earlier calls, each decoded once, and the vendor gets the same bytes', async () => {
    const user = await createTestAccount(p.db, { community: 10 });
    const photos = (await distinctPhotos(7100, VEHICLE_PHOTO_CONCURRENCY + 4)).map((b64) => Buffer.from(b64, 'base64'));
    const counts = async () => {
      const prepared = (await p.worker!.metrics.preparedUploads.get()).values;
      const copies = (await p.worker!.metrics.workCopies.get()).values;
      const of = (values: typeof prepared, outcome: string) => values.find((v) => v.labels.outcome === outcome)?.value ?? 0;
      return { made: of(prepared, 'made'), used: of(prepared, 'used'), failed: of(prepared, 'failed'), missed: of(prepared, 'missed'), decoded: of(copies, 'decoded') };
    };
    const before = await counts();
    const res = await analyze(user.liveKey, { images: photos.map((b) => ({ base64: b.toString('base64') })), preset: 'vehicle-condition' });
    expect(res.statusCode, res.body).toBe(200);
    const after = await counts();
    // The 16 lanes start on the first 16 photos; the 4 left are prepared during those calls and
    // their own calls use the uploads made: every photo read and decoded once, none twice.
    expect({ made: after.made - before.made, used: after.used - before.used, failed: after.failed - before.failed, missed: after.missed - before.missed }).toEqual({ made: 4, used: 4, failed: 0, missed: 0 });
    expect(after.decoded - before.decoded).toBe(photos.length);
    // What the vendor received for each photo is the upload the photo's own decode makes.
    const expected = await Promise.all(photos.map(async (b) => createHash('sha256').update((await prepareImage('openai', await makeWorkCopy(b, 'openai'))).data).digest('hex')));
    const received = p.sim.stats().openai.uploads;
    expect([...new Set(received.filter((h) => expected.includes(h)))].sort()).toEqual([...expected].sort());
    expect(res.json().output.photos.map((ph: { index: number }) => ph.index)).toEqual(photos.map((_, i) => i));
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 9, reserved: 0 });
  });
});
