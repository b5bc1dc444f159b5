/**
 * The iPhone HEIC fixture (2566×3313, HEVC) decoded through images/open.ts by both HEIC decoders —
 * the native one (the system's libheif in a heif-decode process) and the WASM fallback (libheif-js
 * in a worker thread) — against the same picture as a JPEG of the same size (libvips), interleaved,
 * in one run; and fingerprinted, as it is (it carries no thumbnail: full decode) and as the same
 * picture in a HEIC with a 320-pixel thumbnail, as iPhones write them (the native decoder
 * fingerprints from that: docs/decisions.md, "The fingerprint of a HEIC"). Also the time of two
 * refusals (a truncated HEIC, a BMP palette bomb).
 * Run: npx tsx bench/heic-decode.ts — writes bench/results/heic-decode.txt. Builds the native
 * decoder first when it can (tools/scripts/heic-decoder.ts); without it, says so and stops.
 */
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import os from 'node:os';
import { relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import sharp from 'sharp';
import { fingerprint } from '../images/fingerprint.ts';
import { configureHeicDecoder } from '../images/heic-native.ts';
import { openImage } from '../images/open.ts';
import { probeImage } from '../images/probe.ts';
import { ensureHeicDecoder } from '../tools/scripts/heic-decoder.ts';

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
  const withThumbnail = await readFile(new URL('../test/fixtures/crafted/heic-IMG_5195.thumbnail.heic', import.meta.url));
  const paletteBomb = Buffer.alloc(50_000_000);
  paletteBomb.write('BM', 0, 'latin1');
  paletteBomb.writeUInt32LE(54, 10);
  paletteBomb.writeUInt32LE(40, 14);
  paletteBomb.writeInt32LE(1, 18);
  paletteBomb.writeInt32LE(1, 22);
  paletteBomb.writeUInt16LE(1, 26);
  paletteBomb.writeUInt16LE(24, 28);
  paletteBomb.writeUInt32LE(0xffffffff, 46);
  const native = await ensureHeicDecoder();
  const found = await configureHeicDecoder({ HEIC_DECODER: 'native', HEIC_DECODER_PATH: native });
  const libheif = found.backend === 'native' ? found.libheif : 'unknown';
  const libheifJs = (createRequire(import.meta.url)('libheif-js/package.json') as { version: string }).version;
  // Each contender names the HEIC decoder it runs on (null: it decodes no HEIC).
  const contenders: Array<{ name: string; decoder: 'native' | 'wasm' | null; what: string; run: () => Promise<unknown> }> = [
    { name: 'native-full', decoder: 'native', what: 'openImage(HEIC) → raw RGB at full size (a heif-decode child: Debian libheif + libde265)', run: async () => (await openImage(heic)).raw().toBuffer() },
    { name: 'wasm-full', decoder: 'wasm', what: 'openImage(HEIC) → raw RGB at full size (worker start + libheif WASM decode)', run: async () => (await openImage(heic)).raw().toBuffer() },
    { name: 'jpeg-full', decoder: null, what: 'openImage(JPEG) → raw RGB at full size (libvips)', run: async () => (await openImage(jpeg)).raw().toBuffer() },
    { name: 'native-fp', decoder: 'native', what: 'fingerprint(HEIC without a thumbnail), native decoder: full decode', run: () => fingerprint(heic) },
    { name: 'native-thmb', decoder: 'native', what: 'fingerprint(HEIC with a 320-px thumbnail), native decoder: the thumbnail', run: () => fingerprint(withThumbnail) },
    { name: 'wasm-fp', decoder: 'wasm', what: 'fingerprint(HEIC), WASM decoder', run: () => fingerprint(heic) },
    { name: 'jpeg-fp', decoder: null, what: 'fingerprint(JPEG) (shrink-on-load)', run: () => fingerprint(jpeg) },
    // How long a refusal takes (the hostile corpus asserts the refusal, not its speed): a HEIC cut
    // short is refused by libheif from its item locations; a BMP palette bomb from its header.
    { name: 'native-cut', decoder: 'native', what: 'probeImage(HEIC cut at 400 kB) → 422 corrupt or truncated, native decoder', run: () => refusal(probeImage(heic.subarray(0, 400_000), { maxPixels: 100_000_000 })) },
    { name: 'wasm-cut', decoder: 'wasm', what: 'probeImage(HEIC cut at 400 kB) → 422 corrupt or truncated, WASM decoder', run: () => refusal(probeImage(heic.subarray(0, 400_000), { maxPixels: 100_000_000 })) },
    { name: 'bmp-bomb', decoder: null, what: 'probeImage(1×1 BMP declaring 2³²−1 palette colours, 50 MB) → 422 from its header', run: () => refusal(probeImage(paletteBomb, { maxPixels: 100_000_000 })) },
  ];
  const times = new Map(contenders.map((c) => [c.name, [] as number[]]));
  for (let i = 0; i < WARMUP + ITERATIONS; i++) {
    for (let k = 0; k < contenders.length; k++) {
      const c = contenders[(i + k) % contenders.length]!;
      // Chosen (and detected) before the clock starts: only the decode is timed.
      if (c.decoder) await configureHeicDecoder({ HEIC_DECODER: c.decoder, HEIC_DECODER_PATH: native });
      const t0 = performance.now();
      await c.run();
      if (i >= WARMUP) times.get(c.name)!.push(performance.now() - t0);
    }
  }
  const median = (name: string) => quantile([...times.get(name)!].sort((a, b) => a - b), 0.5);
  // The fastest run too: on a shared machine it is the one least disturbed by the others.
  const fastest = (name: string) => Math.min(...times.get(name)!);
  const ratio = (a: string, b: string) => `${(median(a) / median(b)).toFixed(1)} (fastest runs: ${(fastest(a) / fastest(b)).toFixed(1)})`;
  const lines = [
    `HEIC decode benchmark — ${new Date().toISOString()}`,
    `machine: ${os.cpus().length} × ${os.cpus()[0]?.model ?? 'unknown CPU'} (shared), load average ${os.loadavg()[0]!.toFixed(1)}, node ${process.version}, sharp ${sharp.versions.sharp}`,
    `native decoder: ${relative(fileURLToPath(new URL('..', import.meta.url)), native)} (libheif ${libheif}); WASM decoder: libheif-js ${libheifJs}`,
    `input: heic-IMG_5195.HEIC (${(heic.length / 1e6).toFixed(2)} MB), its heif-convert JPEG q85 (${(jpeg.length / 1e6).toFixed(2)} MB) and heic-IMG_5195.thumbnail.heic (heif-enc, 320-px thumbnail, ${(withThumbnail.length / 1e6).toFixed(2)} MB), 2566×3313; ${ITERATIONS} interleaved iterations after ${WARMUP} warm-up`,
    '',
    `${'contender'.padEnd(11)} ${'median ms'.padStart(10)} ${'min ms'.padStart(7)}  what`,
    ...contenders.map((c) => `${c.name.padEnd(11)} ${median(c.name).toFixed(0).padStart(10)} ${fastest(c.name).toFixed(0).padStart(7)}  ${c.what}`),
    '',
    `native: full decode HEIC / JPEG = ${ratio('native-full', 'jpeg-full')} (target ≤ 2); fingerprint HEIC / JPEG = ${ratio('native-thmb', 'jpeg-fp')} with a thumbnail (target ≤ 3), ${ratio('native-fp', 'jpeg-fp')} without one (full decode)`,
    `wasm:   full decode HEIC / JPEG = ${ratio('wasm-full', 'jpeg-full')}; fingerprint HEIC / JPEG = ${ratio('wasm-fp', 'jpeg-fp')}`,
  ];
  const out = lines.join('\n') + '\n';
  process.stdout.write(out);
  await mkdir(fileURLToPath(new URL('./results/', import.meta.url)), { recursive: true });
  await writeFile(new URL('./results/heic-decode.txt', import.meta.url), out);
}

await main();
