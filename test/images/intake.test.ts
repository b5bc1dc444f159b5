import { createHash } from 'node:crypto';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { FsBlobStore } from '../../images/blobstore.ts';
import { fingerprint } from '../../images/fingerprint.ts';
import { intakeImage, type IntakeDeps } from '../../images/intake.ts';
import { isPublicAddress } from '../../images/ssrf.ts';
import { photo } from './photos.ts';
import { type Canary, type PublicServer, startCanaryAndPublic } from './servers.ts';

describe('intakeImage', () => {
  const jpeg = photo('orientation-landscape_6.jpg'); // stored 450×600 with orientation 6
  const sha = createHash('sha256').update(jpeg).digest('hex');
  let root: string;
  let blobs: FsBlobStore;
  let deps: IntakeDeps;
  let canary: Canary;
  let pub: PublicServer;

  beforeAll(async () => {
    ({ canary, server: pub } = await startCanaryAndPublic(jpeg));
  });
  afterAll(async () => {
    await pub.close();
    await canary.close();
  });
  beforeEach(async () => {
    root = await mkdtemp(join(tmpdir(), 'lenstack-intake-'));
    blobs = new FsBlobStore(root);
    deps = {
      blobs,
      maxBytes: 50 * 1024 * 1024,
      maxPixels: 100_000_000,
      fetchPolicy: { allowAddress: (ip) => ip === '127.0.0.2' || isPublicAddress(ip), timeoutMs: 5_000 },
    };
  });
  afterEach(() => rm(root, { recursive: true, force: true }));

  const storedFiles = async () => (await readdir(root, { recursive: true, withFileTypes: true })).filter((e) => e.isFile()).map((e) => e.name);

  it('takes base64 in, stores the exact bytes under their SHA-256 and returns only a small reference', async () => {
    const ref = await intakeImage({ base64: `data:image/jpeg;base64,${jpeg.toString('base64')}` }, deps);
    // New bytes are not decoded here: the worker's one decode makes the hashes after the
    // reservation (docs/decisions.md, "Decoding after the reservation"); the header gives the size.
    expect(ref).toEqual({ sha256: sha, format: 'jpeg', width: 600, height: 450, bytes: jpeg.length, pHash: null, dHash: null, stored: true });
    expect((await blobs.get(sha)).equals(jpeg)).toBe(true);
  });

  it('decodes here only for an embedding, and then fingerprints with the same decode', async () => {
    const fp = await fingerprint(jpeg, { embedding: true });
    const ref = await intakeImage({ base64: jpeg.toString('base64') }, deps, { embedding: true });
    expect(ref).toMatchObject({ sha256: sha, pHash: fp.pHash, dHash: fp.dHash, stored: true });
    expect(ref.embedding!.length).toBeGreaterThan(0);
    expect(ref.embedding).toEqual(fp.embedding);
  });

  it('takes in a photo whose header is whole but whose pixels are cut (the worker refuses it), and refuses it here when it must decode', async () => {
    const cut = jpeg.subarray(0, Math.floor(jpeg.length * 0.8));
    const cutSha = createHash('sha256').update(cut).digest('hex');
    expect(await intakeImage({ base64: cut.toString('base64') }, deps)).toMatchObject({ sha256: cutSha, width: 600, height: 450, pHash: null, stored: true });
    await rm(root, { recursive: true, force: true });
    await expect(intakeImage({ base64: cut.toString('base64') }, deps, { embedding: true })).rejects.toMatchObject({ code: 'IMAGE_INVALID' });
    expect(await storedFiles().catch(() => [])).toEqual([]);
  });

  it('takes no hashes from bytes another account stored (no cross-account shortcut), only from the caller\'s own registry', async () => {
    await intakeImage({ base64: jpeg.toString('base64') }, deps);
    // Already in the blob store, not in this caller's registry: the worker will decode it for this caller.
    const asked: string[] = [];
    const again = await intakeImage({ base64: jpeg.toString('base64') }, { ...deps, knownFingerprint: async (s) => (asked.push(s), null) });
    expect(again).toMatchObject({ sha256: sha, pHash: null, dHash: null, stored: false, registered: false });
    expect(asked).toEqual([sha]);
    // The caller's registry holds the photo: its hashes are used as they are (no decode would produce these).
    const known = { pHash: 'ffffffffffffffff', dHash: '0000000000000000' };
    expect(await intakeImage({ base64: jpeg.toString('base64') }, { ...deps, knownFingerprint: async () => known })).toEqual({
      sha256: sha, format: 'jpeg', width: 600, height: 450, bytes: jpeg.length, ...known, stored: false, registered: true,
    });
  });

  it('takes a URL in through the SSRF-checked fetcher', async () => {
    const ref = await intakeImage({ url: `${pub.origin}/image.jpg` }, deps);
    expect(ref).toMatchObject({ sha256: sha, format: 'jpeg', width: 600, height: 450, bytes: jpeg.length });
    expect(await blobs.has(sha)).toBe(true);
  });

  it('stores one blob for the same image sent twice', async () => {
    await intakeImage({ base64: jpeg.toString('base64') }, deps);
    await intakeImage({ url: `${pub.origin}/image.jpg` }, deps);
    expect(await storedFiles()).toEqual([sha]);
  });

  it('needs exactly one input', async () => {
    await expect(intakeImage({}, deps)).rejects.toMatchObject({ code: 'VALIDATION_FAILED' });
    await expect(intakeImage({ url: `${pub.origin}/image.jpg`, base64: jpeg.toString('base64') }, deps)).rejects.toMatchObject({ code: 'VALIDATION_FAILED' });
  });

  it('stores nothing when the image is refused (a file whose header passes takes back the blob written while it decoded)', async () => {
    const truncated = jpeg.subarray(0, Math.floor(jpeg.length * 0.8)).toString('base64');
    await expect(intakeImage({ base64: truncated }, deps, { embedding: true })).rejects.toMatchObject({ code: 'IMAGE_INVALID' });
    await expect(intakeImage({ base64: photo('heic-IMG_5195.HEIC').subarray(0, 400_000).toString('base64') }, deps, { embedding: true })).rejects.toMatchObject({ code: 'IMAGE_INVALID' });
    await expect(intakeImage({ base64: jpeg.toString('base64') }, { ...deps, maxPixels: 450 * 600 - 1 })).rejects.toMatchObject({ code: 'IMAGE_TOO_LARGE' });
    await expect(intakeImage({ base64: jpeg.toString('base64') }, { ...deps, maxBytes: jpeg.length - 1 })).rejects.toMatchObject({ code: 'IMAGE_TOO_LARGE' });
    await expect(intakeImage({ url: `${pub.origin}/image.jpg` }, { ...deps, maxBytes: jpeg.length - 1 })).rejects.toMatchObject({ code: 'IMAGE_TOO_LARGE' });
    await expect(intakeImage({ url: `http://127.0.0.1:${canary.port}/image.jpg` }, deps)).rejects.toMatchObject({ code: 'VALIDATION_FAILED' });
    expect(await storedFiles()).toEqual([]);
    expect(canary.connections()).toBe(0);
  });

  it('writes nothing for a photo refused at its header, and writes a new photo beside its lease but names it only after', async () => {
    const order: string[] = [];
    const watched: IntakeDeps = {
      ...deps,
      blobs: Object.assign(Object.create(blobs) as FsBlobStore, {
        stage: async (key: string, bytes: Buffer, o?: { verified?: boolean }) => {
          order.push('stage');
          const staged = await blobs.stage(key, bytes, o);
          return { commit: async () => (order.push('commit'), staged.commit()), discard: () => staged.discard() };
        },
      }),
      lease: {
        take: async () => {
          order.push('lease');
          await new Promise((r) => setImmediate(r));
          order.push('leased');
        },
        release: async () => {},
        forget: async () => {},
      },
    };
    await expect(intakeImage({ base64: Buffer.from('not an image at all').toString('base64') }, watched)).rejects.toMatchObject({ code: 'IMAGE_INVALID' });
    await expect(intakeImage({ base64: jpeg.toString('base64') }, { ...watched, maxPixels: 450 * 600 - 1 })).rejects.toMatchObject({ code: 'IMAGE_TOO_LARGE' });
    expect(order.filter((o) => o === 'stage')).toEqual([]);
    expect(await storedFiles().catch(() => [])).toEqual([]);
    order.length = 0;
    const ref = await intakeImage({ base64: jpeg.toString('base64') }, watched);
    expect(ref.stored).toBe(true);
    expect(order.indexOf('commit')).toBeGreaterThan(order.indexOf('leased'));
    expect(order).toContain('stage');
    expect((await blobs.get(sha)).equals(jpeg)).toBe(true);
  });
});
