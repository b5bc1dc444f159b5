import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/**
 * `lenstack batch --vehicles` keeps its memory flat with the size of the fleet (issue 22;
 * docs/decisions.md, "The CLI's memory does not grow with the fleet"): the same command on a fleet
 * of 400 photos and on one of 1,600, each in a process of its own (test/helpers/cli-fleet-memory.ts,
 * against a stub API at the wire), read once every photo is uploaded and while the batch still
 * runs, when the CLI holds the most it keeps. Only bytes are asserted, no timing:
 *
 * - the heap's data after a full collection, whose difference over the 1,200 more photos is what
 *   the CLI keeps per photo: its record of it (path, name, size, time, hash), its upload id in the
 *   state and their map entries, about 600 bytes. Before issue 22 it was 1,450 to 2,260: copies of
 *   each record per step, and a promise reaction per upload kept for the whole run;
 * - the bytes the run's file reads allocated in buffers: the same few reused buffers whatever the
 *   number of photos. Before, every chunk read had a new buffer (1 MiB ones to hash): 2 MiB a
 *   photo here, garbage that the collector freed late and that made the CLI's resident memory grow
 *   with the fleet (bench/README.md, "The CLI's memory against the fleet");
 * - the ArrayBuffers alive after a collection: none is kept per photo.
 */
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const HELPER = fileURLToPath(new URL('../helpers/cli-fleet-memory.ts', import.meta.url));
/** What the CLI may keep per photo, in bytes (it keeps about 600). */
const PER_PHOTO_BOUND = 1000;

interface Measured { heapData: number; arrayBuffers: number; slowBufferBytes: number; measured: boolean; code: number; uploads: number }

function measure(vehicles: number, photos: number): Promise<Measured> {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, ['--expose-gc', '--import', 'tsx', HELPER, String(vehicles), String(photos)], { cwd: ROOT, timeout: 240_000, maxBuffer: 1024 * 1024 }, (err, stdout, stderr) => {
      if (err) return reject(new Error(`${err.message}\n${stderr}`));
      resolve(JSON.parse(stdout.trim().split('\n').at(-1)!) as Measured);
    });
  });
}

describe('the CLI’s memory against the fleet', () => {
  it('keeps a small record per photo and allocates no buffer per photo, whatever the number of photos', async () => {
    const small = await measure(16, 25);
    const large = await measure(64, 25);
    expect(small).toMatchObject({ measured: true, code: 0, uploads: 400 });
    expect(large).toMatchObject({ measured: true, code: 0, uploads: 1600 });
    const perPhoto = (large.heapData - small.heapData) / (1600 - 400);
    expect(perPhoto, `${perPhoto.toFixed(0)} bytes a photo`).toBeLessThan(PER_PHOTO_BOUND);
    // A few reused read buffers (hashing, sending), the same at both sizes.
    expect(small.slowBufferBytes).toBeGreaterThan(0);
    expect(small.slowBufferBytes).toBeLessThan(4 * 1024 * 1024);
    expect(large.slowBufferBytes - small.slowBufferBytes).toBeLessThan(64 * 1024);
    expect(large.arrayBuffers - small.arrayBuffers).toBeLessThan(256 * 1024);
  }, 300_000);
});
