import { randomBytes } from 'node:crypto';
import { parse } from 'csv-parse/sync';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkInvariants, getBalance } from '../../credits/ledger.ts';
import { bearer, createTestAccount, uploadUnderId } from '../helpers/app.ts';
import { DISTINCT_PHOTOS, photoBase64, photoBytes } from '../helpers/photos.ts';
import { startPipeline, type Pipeline } from '../helpers/pipeline.ts';
import { vehicleLanes } from '../../workflows/batch.ts';
import { distinctPhotos } from '../../bench/distinct-photos.ts';

/**
 * Vehicle batches through HTTP against the real pipeline: each vehicle (1 to 50 photos with its own
 * vehicle context) runs the vehicle report saga as a child of the batch workflow.
 */
let p: Pipeline;
beforeAll(async () => {
  p = await startPipeline();
  await p.startWorker();
}, 120_000);
afterAll(async () => p?.close());

const PHOTOS = DISTINCT_PHOTOS;
const b64 = new Map(PHOTOS.map((f) => [f, photoBase64(f)]));
const submit = (key: string, body: Record<string, unknown>) => p.app.inject({ method: 'POST', url: '/v1/batches', headers: bearer(key), payload: body });
const get = async (key: string, url: string) => (await p.app.inject({ method: 'GET', url, headers: bearer(key) })).json();
const completed = (key: string, id: string) =>
  expect.poll(async () => (await get(key, `/v1/batches/${id}`)).status, { timeout: 120_000, interval: 250 }).toBe('completed');

/** Vehicle k: 1 to 4 photos taken round the fixtures, its own VIN. */
const vehicle = (k: number) => {
  const files = Array.from({ length: 1 + (k % 4) }, (_, j) => PHOTOS[(k + j * 3) % PHOTOS.length]!);
  return { name: `car ${k}`, vehicle: { vin: `WVWZZZ1JZ3W${String(100000 + k)}`, make: 'Volkswagen', model: 'Golf', mileage: 10_000 * k }, items: files.map((f) => ({ base64: b64.get(f)!, name: f })), files };
};

describe('a vehicle batch', () => {
  it('gives every one of 20 vehicles one report with one photos entry per photo in submission order, bills each report once, fails a vehicle with a broken photo by name, and exports the report columns', async () => {
    const user = await createTestAccount(p.db, { community: 50 });
    const vehicles = Array.from({ length: 20 }, (_, k) => vehicle(k));
    const broken = { name: 'wreck', items: [{ base64: b64.get('Canon_40D.jpg')!, name: 'front.jpg' }, { base64: Buffer.from('not a photo').toString('base64'), name: 'rear.jpg' }] };
    const res = await submit(user.liveKey, { vehicles: [...vehicles.map(({ files: _files, ...v }) => v), broken] });
    expect(res.statusCode, res.body).toBe(202);
    const batch = res.json();
    expect(batch).toMatchObject({ kind: 'vehicles', stack: 'vehicle-condition', counts: { total: 21, failed: 1 } });

    await completed(user.liveKey, batch.id);
    const done = await get(user.liveKey, `/v1/batches/${batch.id}`);
    expect(done.counts).toEqual({ total: 21, done: 20, failed: 1, pending: 0 });
    // One report per vehicle, one credit each; photos shared between vehicles are described once.
    expect(done.creditsCharged).toBe(20);
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 30, reserved: 0 });
    expect(await checkInvariants(p.db, user.userId)).toEqual([{ userId: user.userId, ok: true, problems: [] }]);

    const items = (await get(user.liveKey, `/v1/batches/${batch.id}/items?limit=100`)).items as Array<{
      index: number; source: string; status: string; creditsCharged: number; error: { code: string; message: string } | null;
      output: { reportId: string; photos: Array<{ index: number }>; vehicleContext?: { vin?: string } } | null; photos: Array<{ source: string; sha256: string | null }>;
    }>;
    expect(items).toHaveLength(21);
    const reportIds = new Set<string>();
    for (const [k, v] of vehicles.entries()) {
      const it = items[k]!;
      expect(it).toMatchObject({ index: k, source: `car ${k}`, status: 'done', creditsCharged: 1 });
      expect(it.photos.map((ph) => ph.source)).toEqual(v.files);
      expect(it.photos.every((ph) => /^[0-9a-f]{64}$/.test(ph.sha256 ?? ''))).toBe(true);
      // Exactly one entry per submitted photo, in submission order.
      expect(it.output!.photos.map((ph) => ph.index)).toEqual(v.files.map((_, j) => j));
      expect(it.output!.vehicleContext?.vin).toBe(v.vehicle.vin);
      reportIds.add(it.output!.reportId);
    }
    expect(reportIds.size).toBe(20);
    expect(items[20]).toMatchObject({ source: 'wreck', status: 'failed', output: null, error: { code: 'IMAGE_INVALID' } });
    expect(items[20]!.error!.message).toMatch(/^photo 2 \(rear\.jpg\): /);

    // One export row per vehicle with the report lens's default columns.
    const csv = await p.app.inject({ method: 'GET', url: `/v1/batches/${batch.id}/export?format=csv`, headers: bearer(user.liveKey) });
    expect(csv.statusCode).toBe(200);
    const records = parse(csv.rawPayload, { bom: true }) as string[][];
    expect(records[0]).toEqual(['#', 'Source', 'Status', 'SHA-256', 'Error', 'Make', 'Model', 'Year', 'VIN', 'Mileage', 'Condition grade', 'Condition score', 'Accident likelihood', 'Missing views']);
    expect(records).toHaveLength(22);
    expect(records.slice(1, 21).map((r) => r[8])).toEqual(vehicles.map((v) => v.vehicle.vin));
    expect(records.slice(1, 21).map((r) => r[9])).toEqual(vehicles.map((v) => String(v.vehicle.mileage)));

    // The same vehicle again, its photos in another order: the stored report, renumbered, for nothing.
    const again = vehicles[3]!;
    const res2 = await submit(user.liveKey, { vehicles: [{ vehicle: again.vehicle, items: [...again.items].reverse() }] });
    expect(res2.statusCode, res2.body).toBe(202);
    await completed(user.liveKey, res2.json().id);
    const [reused] = (await get(user.liveKey, `/v1/batches/${res2.json().id}/items`)).items;
    expect(reused).toMatchObject({ status: 'done', creditsCharged: 0, source: again.vehicle.vin, output: { reportId: items[3]!.output!.reportId } });
    expect(reused.output.photos.map((ph: { index: number }) => ph.index)).toEqual(again.files.map((_, j) => j));
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 30, reserved: 0 });
  }, 60_000);

  it('refuses what is not a vehicle batch with a 400 that changes nothing', async () => {
    const user = await createTestAccount(p.db, { community: 50 });
    const one = { items: [{ base64: b64.get('Canon_40D.jpg')! }] };
    const cases: Array<[Record<string, unknown>, RegExp]> = [
      [{ vehicles: [one], items: one.items }, /either items .* or vehicles/],
      [{ vehicles: [one], preset: 'full-analysis' }, /vehicle-condition stack/],
      [{ items: one.items, preset: 'vehicle-condition' }, /group them by vehicle/],
      [{ vehicles: [{ items: [] }] }, /vehicles\.0\.items/],
      [{ vehicles: [{ items: Array.from({ length: 51 }, () => one.items[0]) }] }, /vehicles\.0\.items/],
      [{ vehicles: Array.from({ length: 1001 }, () => ({ items: [{ url: 'https://example.com/a.jpg' }] })) }, /vehicles/],
      [{ vehicles: Array.from({ length: 201 }, () => ({ items: Array.from({ length: 50 }, () => ({ url: 'https://example.com/a.jpg' })) })) }, /10000 photos|10,000|up to 10000/],
    ];
    for (const [body, message] of cases) {
      const res = await submit(user.liveKey, body);
      expect(res.statusCode, JSON.stringify(body).slice(0, 200)).toBe(400);
      expect(res.json().error.message).toMatch(message);
    }
    expect((await p.db.query('SELECT count(*)::int AS n FROM batches WHERE user_id = $1', [user.userId])).rows[0].n).toBe(0);
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 50, reserved: 0 });
  });
});

describe('vendor calls in flight for a vehicle batch', () => {
  it('a lone vehicle of 6 photos describes 4 at once; 8 vehicles of 2 photos run 4 vehicles at once; never more than the share (4)', async () => {
    const photos = await distinctPhotos(900, 22);
    const car = (k: number, from: number, n: number) => ({ name: `lane ${k}`, vehicle: { vin: `LANE${String(k).padStart(13, '0')}` }, items: photos.slice(from, from + n).map((b, j) => ({ base64: b, name: `${k}-${j}.jpg` })) });
    // Slow enough that calls overlap whenever the scheduling lets them; a new account each, so no photo is already described.
    p.sim.setBehaviour('all', { latencyMs: 400 });
    try {
      const run = async (vehicles: ReturnType<typeof car>[]) => {
        const user = await createTestAccount(p.db, { community: 50 });
        p.sim.resetPeak();
        const res = await submit(user.liveKey, { vehicles });
        expect(res.statusCode, res.body).toBe(202);
        await completed(user.liveKey, res.json().id);
        expect((await get(user.liveKey, `/v1/batches/${res.json().id}`)).counts).toMatchObject({ done: vehicles.length, failed: 0 });
        return p.sim.concurrency().peak;
      };
      expect(await run([car(0, 0, 6)])).toBe(4);
      expect(await run(Array.from({ length: 8 }, (_, k) => car(k + 1, 6 + 2 * k, 2)))).toBe(4);
    } finally {
      p.sim.reset();
    }
  }, 120_000);
});

describe('vehicle lanes', () => {
  it('keeps every vendor call of the share busy and never more: many vehicles run one call each, a lone vehicle takes the whole share', () => {
    expect(vehicleLanes(4, 16)).toEqual({ atOnce: 4, photoConcurrency: 1 });
    expect(vehicleLanes(4, 1)).toEqual({ atOnce: 1, photoConcurrency: 4 });
    expect(vehicleLanes(4, 2)).toEqual({ atOnce: 2, photoConcurrency: 2 });
    expect(vehicleLanes(1, 16)).toEqual({ atOnce: 1, photoConcurrency: 1 });
    for (let share = 1; share <= 16; share++) {
      for (let vehicles = 1; vehicles <= 64; vehicles++) {
        const { atOnce, photoConcurrency } = vehicleLanes(share, vehicles);
        expect(atOnce * photoConcurrency).toBeLessThanOrEqual(share);
        expect(atOnce).toBe(Math.min(share, vehicles));
      }
    }
  });
});

describe('a vehicle batch awaiting its uploads (awaitUploads)', () => {
  const newId = () => `upl_${randomBytes(16).toString('hex')}`;

  it('starts before its photos exist; each vehicle runs once its own uploads finished, and one refused at upload fails its vehicle by name', async () => {
    const user = await createTestAccount(p.db, { community: 20 });
    const ids = [newId(), newId(), newId()];
    const res = await submit(user.liveKey, {
      awaitUploads: true,
      vehicles: [
        { name: 'van', items: [{ uploadId: ids[0], name: 'front.jpg' }, { uploadId: ids[1], name: 'rear.jpg' }] },
        { name: 'wreck', items: [{ uploadId: ids[2], name: 'bad.jpg' }] },
      ],
    });
    expect(res.statusCode, res.body).toBe(202);
    const batch = res.json();
    expect(batch).toMatchObject({ kind: 'vehicles', status: 'running', counts: { total: 2, done: 0, failed: 0, pending: 2 } });
    // Nothing uploaded: nothing can run, nothing is billed.
    await new Promise((r) => setTimeout(r, 1500));
    expect((await get(user.liveKey, `/v1/batches/${batch.id}`)).counts).toEqual({ total: 2, done: 0, failed: 0, pending: 2 });

    expect((await uploadUnderId(p.app, user.liveKey, ids[0]!, photoBytes('Canon_40D.jpg'))).statusCode).toBe(201);
    expect((await uploadUnderId(p.app, user.liveKey, ids[1]!, photoBytes('Nikon_D70.jpg'))).statusCode).toBe(201);
    expect((await uploadUnderId(p.app, user.liveKey, ids[2]!, Buffer.from('not a photo at all'))).statusCode).toBe(422);
    await completed(user.liveKey, batch.id);
    const items = (await get(user.liveKey, `/v1/batches/${batch.id}/items`)).items;
    expect(items[0]).toMatchObject({ source: 'van', status: 'done', creditsCharged: 1 });
    expect(items[0].photos.map((ph: { sha256: string }) => ph.sha256)).toEqual(
      (await p.db.query<{ sha256: string }>('SELECT sha256 FROM uploads WHERE id = ANY($1) ORDER BY array_position($1, id)', [ids.slice(0, 2)])).rows.map((r) => r.sha256),
    );
    expect(items[1]).toMatchObject({ source: 'wreck', status: 'failed', error: { code: 'IMAGE_INVALID' } });
    expect(items[1].error.message).toMatch(new RegExp(`^photo 1 \\(bad\\.jpg\\): upload ${ids[2]} was refused`));
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 19, reserved: 0 });
  });

  it('refuses another account\'s upload (404) and a photo batch that would await (400), changing nothing', async () => {
    const user = await createTestAccount(p.db, { community: 20 });
    const other = await createTestAccount(p.db, { community: 20 });
    const theirs = newId();
    expect((await uploadUnderId(p.app, other.liveKey, theirs, photoBytes('Canon_40D.jpg'))).statusCode).toBe(201);
    const cases: Array<[Record<string, unknown>, number, RegExp]> = [
      [{ awaitUploads: true, vehicles: [{ items: [{ uploadId: theirs }] }] }, 404, new RegExp(`no upload ${theirs} for this account`)],
      [{ awaitUploads: true, items: [{ uploadId: newId() }], preset: 'full-analysis' }, 400, /only a vehicle batch awaits/],
    ];
    for (const [body, status, message] of cases) {
      const res = await submit(user.liveKey, body);
      expect(res.statusCode, res.body).toBe(status);
      expect(res.json().error.message).toMatch(message);
    }
    expect((await p.db.query('SELECT count(*)::int AS n FROM batches WHERE user_id = $1', [user.userId])).rows[0].n).toBe(0);
  });

  it('refuses an upload id not shaped like one, in a batch or at its upload, with a 400 naming the field that changes nothing', async () => {
    const user = await createTestAccount(p.db, { community: 20 });
    // Not upl_ and 32 lowercase hex digits: a typo, a truncated id, a client's own scheme.
    const malformed = ['upl_nope', `upl_${'A'.repeat(32)}`, `upl_${'0'.repeat(31)}`, `xyz_${'0'.repeat(32)}`, `upl_${'0'.repeat(32)} `];
    for (const bad of malformed) {
      for (const [body, field] of [
        [{ awaitUploads: true, vehicles: [{ items: [{ uploadId: newId() }, { uploadId: bad }] }] }, 'body.vehicles.0.items.1.uploadId'],
        [{ vehicles: [{ name: 'van', items: [{ uploadId: bad }] }] }, 'body.vehicles.0.items.0.uploadId'],
        [{ items: [{ uploadId: bad }], preset: 'full-analysis' }, 'body.items.0.uploadId'],
      ] as const) {
        const res = await submit(user.liveKey, body);
        expect(res.statusCode, res.body).toBe(400);
        expect(res.json()).toEqual({ error: { code: 'VALIDATION_FAILED', message: expect.stringContaining(field), retryable: false, requestId: expect.any(String) } });
      }
      // The tus creation's requested id is refused too, rather than replaced by one the API makes.
      const up = await uploadUnderId(p.app, user.liveKey, bad, photoBytes('Canon_40D.jpg'));
      expect(up.statusCode, up.body).toBe(400);
      expect(up.headers.location).toBeUndefined();
      expect(up.json()).toEqual({ error: { code: 'VALIDATION_FAILED', message: expect.stringContaining('Upload-Metadata: uploadId'), retryable: false, requestId: expect.any(String) } });
    }
    // Nothing was made: no batch, no hold, no upload.
    expect((await p.db.query('SELECT count(*)::int AS n FROM batches WHERE user_id = $1', [user.userId])).rows[0].n).toBe(0);
    expect((await p.db.query('SELECT count(*)::int AS n FROM uploads WHERE user_id = $1', [user.userId])).rows[0].n).toBe(0);
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 20, reserved: 0 });
  });
});
