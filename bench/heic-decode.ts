/**
 * The iPhone HEIC fixture (2566×3313, HEVC) decoded through images/open.ts (libheif WASM in a
 * worker thread) against the same picture as a JPEG of the same size (libvips), interleaved.
 * Also the time of two refusals (a truncated HEIC, a BMP palette bomb).
 * Run: npx tsx bench/heic-decode.ts — writes bench/results/heic-decode.txt.
 */
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import os from 'node:os';
import { fileURLToPath } from 'node:url';
import sharp from 'sharp';
import { fingerprint } from '../images/fingerprint.ts';
import { openImage } from '../images/open.ts';
import { probeImage } from '../images/probe.ts';

const ITERATIONS = 9;
const WARMUP = 1;
const PHOTOS = new URL('../test/fixtures/photos/', import.meta.url);

/** Resolves when `p` is refused with a 422; anything else is a broken benchmark. */
const refusal = (p: Promise<unknown>) =>
  p.then(
    () => Promise.reject(new Error('expected a refusal')),
    (err: { status?: number }) => (err.status === 422 ? undefined : Promise.reject(err)),
  );

const quantile = (sorted: number[], q: number) => sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)]!;

async function main(): Promise<void> {
  const heic = await readFile(new URL('heic-IMG_5195.HEIC', PHOTOS));
  const jpeg = await readFile(new URL('heic-IMG_5195.heif-convert.jpg', PHOTOS));
  const paletteBomb = Buffer.alloc(50_000_000);
  paletteBomb.write('BM', 0, 'latin1');
  paletteBomb.writeUInt32LE(54, 10);
  paletteBomb.writeUInt32LE(40, 14);
  paletteBomb.writeInt32LE(1, 18);
  paletteBomb.writeInt32LE(1, 22);
  paletteBomb.writeUInt16LE(1, 26);
  paletteBomb.writeUInt16LE(24, 28);
  paletteBomb.writeUInt32LE(0xffffffff, 46);
  const contenders = [
    { name: 'heic-full', what: 'openImage(HEIC) → raw RGB at full size (worker start + libheif WASM decode)', run: async () => (await openImage(heic)).raw().toBuffer() },
    { name: 'jpeg-full', what: 'openImage(JPEG) → raw RGB at full size (libvips)', run: async () => (await openImage(jpeg)).raw().toBuffer() },
    { name: 'heic-fp', what: 'fingerprint(HEIC)', run: () => fingerprint(heic) },
    { name: 'jpeg-fp', what: 'fingerprint(JPEG) (shrink-on-load)', run: () => fingerprint(jpeg) },
    // How long a refusal takes (the hostile corpus asserts the refusal, not its speed): a HEIC cut
    // short is found only by decoding what is there; a BMP palette bomb is refused from its header.
    { name: 'heic-cut', what: 'probeImage(HEIC cut at 400 kB) → 422 corrupt or truncated', run: () => refusal(probeImage(heic.subarray(0, 400_000), { maxPixels: 100_000_000 })) },
    { name: 'bmp-bomb', what: 'probeImage(1×1 BMP declaring 2³²−1 palette colours, 50 MB) → 422 from its header', run: () => refusal(probeImage(paletteBomb, { maxPixels: 100_000_000 })) },
  ];
  const times = new Map(contenders.map((c) => [c.name, [] as number[]]));
  for (let i = 0; i < WARMUP + ITERATIONS; i++) {
    for (let k = 0; k < contenders.length; k++) {
      const c = contenders[(i + k) % contenders.length]!;
      const t0 = performance.now();
      await c.run();
      if (i >= WARMUP) times.get(c.name)!.push(performance.now() - t0);
    }
  }
  const median = (name: string) => quantile([...times.get(name)!].sort((a, b) => a - b), 0.5);
  const lines = [
    `HEIC decode benchmark — ${new Date().toISOString()}`,
    `machine: ${os.cpus().length} × ${os.cpus()[0]?.model ?? 'unknown CPU'} (shared), load average ${os.loadavg()[0]!.toFixed(1)}, node ${process.version}, sharp ${sharp.versions.sharp}`,
    `input: heic-IMG_5195.HEIC (${(heic.length / 1e6).toFixed(2)} MB) and its heif-convert JPEG q85 (${(jpeg.length / 1e6).toFixed(2)} MB), 2566×3313; ${ITERATIONS} interleaved iterations after ${WARMUP} warm-up`,
    '',
    `${'contender'.padEnd(10)} ${'median ms'.padStart(10)}  what`,
    ...contenders.map((c) => `${c.name.padEnd(10)} ${median(c.name).toFixed(0).padStart(10)}  ${c.what}`),
    '',
    `ratio heic-full / jpeg-full = ${(median('heic-full') / median('jpeg-full')).toFixed(1)}; heic-fp / jpeg-fp = ${(median('heic-fp') / median('jpeg-fp')).toFixed(1)}`,
  ];
  const out = lines.join('\n') + '\n';
  process.stdout.write(out);
  await mkdir(fileURLToPath(new URL('./results/', import.meta.url)), { recursive: true });
  await writeFile(new URL('./results/heic-decode.txt', import.meta.url), out);
}

await main();
