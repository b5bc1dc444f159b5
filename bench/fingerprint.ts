/**
 * fingerprint() against decode-only baselines on a 12-MP JPEG, interleaved in one run so machine
 * noise hits every contender alike. Run: npx tsx bench/fingerprint.ts
 * Writes bench/results/fingerprint.txt.
 */
import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import sharp from 'sharp';
import { fingerprint } from '../images/fingerprint.ts';

const ITERATIONS = 40;
const WARMUP = 5;
const SOURCE = fileURLToPath(new URL('../test/fixtures/photos/mobile-jolla.jpg', import.meta.url));

type Contender = { name: string; what: string; run: (buf: Buffer) => Promise<unknown> };

const contenders: Contender[] = [
  { name: 'fingerprint', what: 'fingerprint(): sha256 + one shrink-on-load decode + pHash + dHash', run: (b) => fingerprint(b) },
  {
    name: 'decode-full',
    what: 'full decode to RGB: sharp(buf).raw().toBuffer() (every pixel at 4000×3000)',
    run: (b) => sharp(b).raw().toBuffer(),
  },
  {
    name: 'decode-shrink',
    what: 'shrink-on-load decode: sharp(buf).resize(500, 375).raw() (libjpeg 1/8 DCT scaling, no resampling)',
    run: (b) => sharp(b).resize(500, 375).raw().toBuffer(),
  },
  {
    name: 'decode-as-fp',
    what: "fingerprint's own decode alone: autoOrient → 288×256 fill → grey, raw",
    run: (b) => sharp(b).autoOrient().resize(288, 256, { fit: 'fill' }).greyscale().raw().toBuffer(),
  },
  { name: 'sha256', what: 'SHA-256 of the file bytes alone', run: async (b) => createHash('sha256').update(b).digest('hex') },
];

const quantile = (sorted: number[], q: number) => sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)]!;

async function main(): Promise<void> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'lenstack-bench-'));
  try {
    const file = path.join(dir, '12mp.jpg');
    // A real camera photo (3264×2448) scaled to 4000×3000, stored as a camera would (q92, 4:2:0).
    await sharp(SOURCE).resize(4000, 3000, { fit: 'fill' }).jpeg({ quality: 92 }).toFile(file);
    const buf = await readFile(file);

    const times = new Map<string, number[]>(contenders.map((c) => [c.name, []]));
    for (let i = 0; i < WARMUP + ITERATIONS; i++) {
      // Rotate the starting contender so none always runs right after another's cache warm-up.
      for (let k = 0; k < contenders.length; k++) {
        const c = contenders[(i + k) % contenders.length]!;
        const t0 = performance.now();
        await c.run(buf);
        const ms = performance.now() - t0;
        if (i >= WARMUP) times.get(c.name)!.push(ms);
      }
    }

    const stats = new Map(
      contenders.map((c) => {
        const sorted = [...times.get(c.name)!].sort((a, b) => a - b);
        return [c.name, { median: quantile(sorted, 0.5), p90: quantile(sorted, 0.9), min: sorted[0]! }];
      }),
    );
    const fp = stats.get('fingerprint')!.median;
    const lines = [
      `fingerprint benchmark — ${new Date().toISOString()}`,
      `machine: ${os.cpus().length} × ${os.cpus()[0]?.model ?? 'unknown CPU'} (shared), ${Math.round(os.totalmem() / 2 ** 30)} GiB, ${os.platform()} ${os.release()}`,
      `node ${process.version}, sharp ${sharp.versions.sharp}, libvips ${sharp.versions.vips}, sharp.concurrency() = ${sharp.concurrency()}`,
      `input: 4000×3000 JPEG q92 from ${path.basename(SOURCE)}, ${(buf.length / 1e6).toFixed(2)} MB; ${ITERATIONS} interleaved iterations after ${WARMUP} warm-up`,
      '',
      `${'contender'.padEnd(14)} ${'median ms'.padStart(10)} ${'p90 ms'.padStart(8)} ${'min ms'.padStart(8)} ${'fp/this'.padStart(8)}  what`,
      ...contenders.map((c) => {
        const s = stats.get(c.name)!;
        return `${c.name.padEnd(14)} ${s.median.toFixed(1).padStart(10)} ${s.p90.toFixed(1).padStart(8)} ${s.min.toFixed(1).padStart(8)} ${(fp / s.median).toFixed(2).padStart(8)}  ${c.what}`;
      }),
      '',
      `ratio fingerprint / decode-full   = ${(fp / stats.get('decode-full')!.median).toFixed(2)}`,
      `ratio fingerprint / decode-shrink = ${(fp / stats.get('decode-shrink')!.median).toFixed(2)}  (target ≤ 1.3)`,
    ];
    const report = `${lines.join('\n')}\n`;
    process.stdout.write(report);
    const out = path.join(path.dirname(fileURLToPath(import.meta.url)), 'results', 'fingerprint.txt');
    await mkdir(path.dirname(out), { recursive: true });
    await writeFile(out, report);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

await main();
