import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getBalance } from '../../credits/ledger.ts';
import { closeSharedMetadataTool } from '../../enrich/exiftool.ts';
import { buildTestApp, createTestAccount, expectEnvelope, type TestApp } from '../helpers/app.ts';
import { seedRegistry } from '../enrich/helpers.ts';
import { tiffFile } from './images/containers.ts';

/**
 * Found by the hostile image corpus: a TIFF whose IFD chain loops back to itself decodes fine,
 * but exiftool hashes its strip once per visit of the loop before the write and once after it
 * (the rewrite drops the loop), so the "image data changed" check fired and enrichment answered
 * 500 INTERNAL_ERROR, retryable, for a file the caller sent. It is the file's fault and retrying
 * cannot help: 422 IMAGE_INVALID, nothing charged.
 */

let t: TestApp;
const loopingTiff = tiffFile({ width: 4, height: 4, strip: Buffer.alloc(16, 0x80), next: 8 });

beforeAll(async () => {
  t = await buildTestApp();
}, 60_000);
afterAll(async () => {
  await t?.close();
  await closeSharedMetadataTool();
});

const enrich = (key: string) =>
  t.app.inject({ method: 'POST', url: '/v2/enrich', headers: { authorization: `Bearer ${key}` }, payload: { imageBase64: loopingTiff.toString('base64'), formats: ['xmp'] } });

describe('POST /v2/enrich with a TIFF whose IFD chain loops', () => {
  it('sandbox key: 422 IMAGE_INVALID, not a retryable 500', async () => {
    const user = await createTestAccount(t.db);
    const res = await enrich(user.testKey);
    expect(res.statusCode, res.body).toBe(422);
    const e = expectEnvelope(res.json());
    expect(e).toMatchObject({ code: 'IMAGE_INVALID', retryable: false });
    expect(e.message).toMatch(/image data/);
  });

  it('live key with lens records for it: 422, and the reserved credits are released', async () => {
    const user = await createTestAccount(t.db, { community: 20 });
    await seedRegistry(t.db, user.userId, loopingTiff, { describe: { title: 'A grey square', caption: 'Grey.', tags: ['grey'] } });
    const res = await enrich(user.liveKey);
    expect(res.statusCode, res.body).toBe(422);
    expect(expectEnvelope(res.json()).code).toBe('IMAGE_INVALID');
    expect(await getBalance(t.db, user.userId)).toMatchObject({ community: 20, purchased: 0, reserved: 0 });
  });
});
