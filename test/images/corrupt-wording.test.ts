import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../core/logger.ts';
import { CORRUPT_IMAGE, UNREADABLE_IMAGE } from '../../core/errors.ts';
import { bearer, buildTestApp, createTestAccount, expectEnvelope, type TestApp } from '../helpers/app.ts';
import { photoBytes } from '../helpers/photos.ts';

/**
 * A photo whose header reads but whose pixels do not decode is answered in Lenstack's words, the
 * same every time; libvips's own wording (which differed between runs for one file: "VipsJpeg:
 * Corrupt JPEG data…" once, "Unknown error" the next) stays in the log line, as its cause.
 */
let t: TestApp;
const logs: string[] = [];
beforeAll(async () => {
  t = await buildTestApp({ deps: { logger: createLogger({ LOG_LEVEL: 'info' }, 'api', { write: (line: string) => void logs.push(line) }) } });
});
afterAll(() => t?.close());

describe('a corrupt photo', () => {
  it('is IMAGE_INVALID with one fixed message on every try, and the decoder\'s words only in the log', async () => {
    const user = await createTestAccount(t.db);
    const messages: string[] = [];
    const whole = photoBytes('Canon_40D.jpg');
    // Cut short, its middle zeroed, and cut short again: three ways libvips words differently.
    const corrupt = [
      whole.subarray(0, Math.floor(whole.length * 0.3)),
      Buffer.concat([whole.subarray(0, 2000), Buffer.alloc(whole.length - 4000), whole.subarray(whole.length - 2000)]),
      whole.subarray(0, Math.floor(whole.length * 0.3)),
    ];
    for (const bytes of corrupt) {
      const res = await t.app.inject({ method: 'POST', url: '/v2/lookup', headers: bearer(user.liveKey), payload: { images_base64: [bytes.toString('base64')] } });
      expect(res.statusCode, res.body).toBe(422);
      const error = expectEnvelope(res.json());
      expect(error.code).toBe('IMAGE_INVALID');
      messages.push(error.message);
    }
    // One of two fixed sentences, whatever libvips said; the same file gets the same words again.
    for (const m of messages) expect([`body.images_base64.0: ${UNREADABLE_IMAGE}`, `body.images_base64.0: ${CORRUPT_IMAGE}`]).toContain(m);
    expect(messages[2]).toBe(messages[0]);
    const rejected = logs.map((l) => JSON.parse(l) as { msg?: string; code?: string; cause?: string }).filter((l) => l.code === 'IMAGE_INVALID');
    expect(rejected.length).toBe(3);
    expect(rejected.map((l) => l.cause)).toEqual([expect.stringMatching(/VipsJpeg/), expect.stringMatching(/VipsJpeg/), expect.stringMatching(/VipsJpeg/)]);
  });
});
