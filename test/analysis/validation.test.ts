import zlib from 'node:zlib';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getBalance } from '../../credits/ledger.ts';
import { isPublicAddress } from '../../images/ssrf.ts';
import { bearer, createTestAccount, expectEnvelope, type TestAccount } from '../helpers/app.ts';
import { photoBase64, photoBytes } from '../helpers/photos.ts';
import { startPipeline, type Pipeline } from '../helpers/pipeline.ts';
import { closedPort, type Canary, type PublicServer, startCanaryAndPublic } from '../images/servers.ts';

let p: Pipeline;
let user: TestAccount;
let canary: Canary;
let server: PublicServer;
const GOOD = photoBase64('Canon_40D.jpg');

beforeAll(async () => {
  ({ canary, server } = await startCanaryAndPublic(photoBytes('Canon_40D.jpg')));
  // 127.0.0.2 plays a public host; everything else keeps the production policy.
  p = await startPipeline({
    worker: false,
    config: { IMAGE_MAX_BYTES: 500_000 },
    fetchPolicy: { allowAddress: (ip) => ip === '127.0.0.2' || isPublicAddress(ip), timeoutMs: 3000 },
  });
  user = await createTestAccount(p.db, { community: 50 });
}, 120_000);
afterAll(async () => {
  await p?.close();
  await server?.close();
  await canary?.close();
});

async function expectRejected(body: unknown, status: number, code: string, field?: string) {
  const res = await p.app.inject({ method: 'POST', url: '/v1/analyze', headers: bearer(user.liveKey), payload: body as object });
  expect(res.statusCode, res.body.slice(0, 300)).toBe(status);
  const e = expectEnvelope(res.json());
  expect(e.code).toBe(code);
  expect(e.retryable).toBe(false);
  if (field) expect(e.message).toContain(field);
  return e;
}

describe('400 VALIDATION_FAILED naming the field', () => {
  const cases: Array<[string, Record<string, unknown>, string]> = [
    ['no image at all', { preset: 'quick-scan' }, 'image'],
    ['both input styles', { imageBase64: GOOD, images: [{ base64: GOOD }] }, 'images'],
    ['imageUrl and imageBase64', { imageBase64: GOOD, imageUrl: 'https://example.com/a.jpg' }, 'imageUrl'],
    ['a relative URL', { imageUrl: 'photo.jpg' }, 'imageUrl'],
    ['a URL over 2048 chars', { imageUrl: 'https://example.com/' + 'a'.repeat(2048) }, 'imageUrl'],
    ['empty base64', { imageBase64: '' }, 'imageBase64'],
    ['images: []', { images: [] }, 'images'],
    ['51 images', { images: Array.from({ length: 51 }, () => ({ base64: GOOD })) }, 'images'],
    ['an images item with neither url nor base64', { images: [{}] }, 'images.0'],
    ['an unknown lens', { imageBase64: GOOD, modules: ['dating', 'horoscope'] }, 'horoscope'],
    ['an unknown preset', { imageBase64: GOOD, preset: 'everything' }, 'everything'],
    ['the internal lens in modules', { imageBase64: GOOD, modules: ['vehicle-condition'] }, 'vehicle-condition'],
    ['an unknown lens in modulesAdd', { imageBase64: GOOD, preset: 'quick-scan', modulesAdd: ['x'] }, 'modulesAdd'],
    ['moduleOptions for an unknown lens', { imageBase64: GOOD, modules: ['dating'], moduleOptions: { nope: { a: 1 } } }, 'moduleOptions'],
    ['51 knownPeople', { imageBase64: GOOD, context: { knownPeople: Array.from({ length: 51 }, (_, i) => ({ name: `P${i}` })) } }, 'knownPeople'],
    ['a knownPeople name over 200', { imageBase64: GOOD, context: { knownPeople: [{ name: 'n'.repeat(201) }] } }, 'name'],
    ['a knownPeople role over 100', { imageBase64: GOOD, context: { knownPeople: [{ name: 'A', role: 'r'.repeat(101) }] } }, 'role'],
    ['a knownPeople item without name', { imageBase64: GOOD, context: { knownPeople: [{ role: 'aunt' }] } }, 'name'],
    ['a fractional birthYear', { imageBase64: GOOD, context: { knownPeople: [{ name: 'A', birthYear: 1950.5 }] } }, 'birthYear'],
    ['a VIN over 20', { imageBase64: GOOD, context: { vehicle: { vin: 'V'.repeat(21) } } }, 'vin'],
    ['a make over 100', { imageBase64: GOOD, context: { vehicle: { make: 'm'.repeat(101) } } }, 'make'],
    ['a string mileage', { imageBase64: GOOD, context: { vehicle: { mileage: '12000' } } }, 'mileage'],
    ['customInstructions over 2000', { imageBase64: GOOD, context: { customInstructions: 'c'.repeat(2001) } }, 'customInstructions'],
    ['a non-boolean option', { imageBase64: GOOD, options: { includeFingerprint: 'yes' } }, 'includeFingerprint'],
    ['a non-boolean refresh', { imageBase64: GOOD, refresh: 'true' }, 'refresh'],
    ['an unknown field', { imageBase64: GOOD, modul: ['dating'] }, 'modul'],
    ['extract on v1', { imageBase64: GOOD, extract: { prompt: 'x' } }, 'extract'],
    ['modules not an array', { imageBase64: GOOD, modules: 'dating' }, 'modules'],
  ];
  for (const [name, body, field] of cases) {
    it(name, async () => {
      await expectRejected(body, 400, 'VALIDATION_FAILED', field);
    });
  }

  it('base64 over 67,000,000 characters', async () => {
    await expectRejected({ imageBase64: 'A'.repeat(67_000_001) }, 400, 'VALIDATION_FAILED', 'imageBase64');
  }, 60_000);

  it('non-base64 characters', async () => {
    await expectRejected({ imageBase64: '%%%not base64%%%' }, 400, 'VALIDATION_FAILED');
  });
});

describe('422 for images that cannot be used', () => {
  // A truncated JPEG whose header is whole passes intake and is refused by the worker's decode,
  // after the reservation: test/analysis/refusal-order.test.ts.
  it('a JPEG with a corrupted header → IMAGE_INVALID', async () => {
    const bytes = Buffer.from(photoBytes('gps-DSCN0012.jpg'));
    bytes.fill(0xff, 2, 400);
    await expectRejected({ imageBase64: bytes.toString('base64') }, 422, 'IMAGE_INVALID');
  });
  it('bytes that are no image → IMAGE_INVALID', async () => {
    await expectRejected({ imageBase64: Buffer.from('just some text, not a photo').toString('base64') }, 422, 'IMAGE_INVALID');
  });
  it('a file over the byte cap → IMAGE_TOO_LARGE', async () => {
    await expectRejected({ imageBase64: photoBase64('mobile-jolla.jpg') }, 422, 'IMAGE_TOO_LARGE');
  });
  it('a decompression bomb (a small PNG declaring 30000×30000) → IMAGE_TOO_LARGE', async () => {
    const small = await sharp({ create: { width: 64, height: 64, channels: 3, background: { r: 0, g: 0, b: 0 } } }).png().toBuffer();
    // IHDR starts at byte 8: length(4) 'IHDR'(4) width(4) height(4) … crc(4) over type+data.
    const bomb = Buffer.from(small);
    bomb.writeUInt32BE(30_000, 16);
    bomb.writeUInt32BE(30_000, 20);
    bomb.writeUInt32BE(zlib.crc32(bomb.subarray(12, 29)), 29);
    await expectRejected({ imageBase64: bomb.toString('base64') }, 422, 'IMAGE_TOO_LARGE');
  });
  it('an unreachable URL → IMAGE_INVALID', async () => {
    await expectRejected({ imageUrl: `http://127.0.0.2:${await closedPort()}/photo.jpg` }, 422, 'IMAGE_INVALID');
  });
  it('a URL answering 404 → IMAGE_INVALID', async () => {
    await expectRejected({ imageUrl: `${server.origin}/missing` }, 422, 'IMAGE_INVALID');
  });
});

describe('SSRF: user URLs never reach private networks', () => {
  it('loopback, private, link-local, mapped IPv6, numeric-host tricks and redirects are 400 and never connect', async () => {
    const port = canary.port;
    const before = canary.connections();
    const urls = [
      `http://127.0.0.1:${port}/`,
      `http://localhost:${port}/`,
      `http://[::1]:${port}/`,
      `http://[::ffff:127.0.0.1]:${port}/`,
      `http://[::ffff:7f00:1]:${port}/`,
      `http://2130706433:${port}/`,
      `http://0177.0.0.1:${port}/`,
      `http://0x7f.0.0.1:${port}/`,
      `http://127.1:${port}/`,
      `http://user@127.0.0.1:${port}/`,
      'http://10.0.0.1/',
      'http://192.168.1.1/',
      'http://172.16.0.1/',
      'http://169.254.169.254/latest/meta-data/',
      'http://100.64.0.1/',
      'http://0.0.0.0/',
      'http://[fd00::1]/',
      'http://[fe80::1]/',
      'file:///etc/passwd',
      'ftp://example.com/a.jpg',
      `${server.origin}/to-canary`,
      `${server.origin}/to-canary-decimal`,
      `${server.origin}/to-canary-v6`,
    ];
    for (const imageUrl of urls) {
      const res = await p.app.inject({ method: 'POST', url: '/v1/analyze', headers: bearer(user.liveKey), payload: { imageUrl } });
      expect(res.statusCode, `${imageUrl}: ${res.body}`).toBe(400);
      expect(expectEnvelope(res.json()).code).toBe('VALIDATION_FAILED');
    }
    expect(canary.connections() - before).toBe(0);
  });

  it('a sandbox key answers with fixtures without fetching the URL at all', async () => {
    const hits = server.hits.get('/image.jpg') ?? 0;
    const res = await p.app.inject({ method: 'POST', url: '/v1/analyze', headers: bearer(user.testKey), payload: { imageUrl: `${server.origin}/image.jpg` } });
    expect(res.statusCode).toBe(200);
    expect(server.hits.get('/image.jpg') ?? 0).toBe(hits);
  });
});

describe('bad input changes nothing', () => {
  it('no credit moved, no registry row, no reservation for any rejected request above', async () => {
    expect(await getBalance(p.db, user.userId)).toEqual({ community: 50, purchased: 0, reserved: 0, referralBonus: 0 });
    for (const table of ['photos', 'lens_records', 'reservations']) {
      const r = await p.db.query(`SELECT count(*)::int AS n FROM ${table} WHERE user_id = $1`, [user.userId]);
      expect(r.rows[0].n, table).toBe(0);
    }
  });
});
