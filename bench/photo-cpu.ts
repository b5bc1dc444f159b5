/**
 * The worker's CPU per photo (issue 22 §4): what a vehicle-photo vendor attempt costs from the
 * stored original's bytes up to the encoded vendor upload, with the perceptual hashes of a photo
 * new to the registry (`workCopies.withHashes`, then `prepareImage` for the first vendor of
 * VENDOR_ORDER). Run: npx tsx bench/photo-cpu.ts [--photos 6] [--rounds 5] [--vendor openai]
 * Writes bench/results/photo-cpu.txt.
 *
 * Photos: bench/camera-photos.ts, the fleet bench's camera-like JPEGs (4.9–7.1 MP, q95, 3.4–4.9 MB).
 * Each contender runs on every photo in turn, the contenders interleaved photo by photo and their
 * order rotated each round, so machine noise hits them alike. CPU is process.cpuUsage() (user +
 * system of every thread, libvips' included) around one photo's work, run one photo at a time.
 * Figures are medians over photos × rounds; the comparison is their ratio, never a timed assertion.
 *
 * Contenders:
 * - **before**: the path as it was at 416e2f2 (a frozen copy below: the work copy's decode at the
 *   largest billed size of every vendor, the old rule inlined, and the hashes' decode side by
 *   side, then the upload resized from the copy and encoded with sharp's default Huffman-table
 *   optimisation).
 * - **after**: the code as it is now, through the worker's own entry points (the work copy at the
 *   asked vendor's billed size: docs/decisions.md, "The work copy's size").
 * - **all-vendor copy**: the path just before the copy was sized per vendor (the copy at the
 *   largest billed size, today's encode), to show that change alone.
 * - the parts: each decode and the encode alone, and two floors (the entropy decode the two
 *   decodes cannot share, and a contender not taken: the upload decoded straight from the
 *   original with shrink-on-load, with no work copy at all).
 *
 * Before the timings, the bench checks on every photo that after gives what before gave: the same
 * pHash and dHash and the same upload size, and that after's upload is byte for byte the one
 * made straight from the original (`prepareImage` of the original's bytes). Its pixels differ from
 * before's, which were resized twice (to the copy's 1536 px, then to the upload's): the bench
 * says by how much.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import os from 'node:os';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import sharp from 'sharp';
import { VENDOR_NAMES, type VendorName } from '../core/vendor-names.ts';
import { decodeCheckedHashes } from '../images/intake.ts';
import { billedSize, makeWorkCopy, prepareImage, type Size, type WorkCopy } from '../vendors/resize.ts';
import { createWorkCopies } from '../vendors/work-copies.ts';
import { cameraPhotos } from './camera-photos.ts';

const { values: opts } = parseArgs({
  options: { photos: { type: 'string', default: '6' }, rounds: { type: 'string', default: '5' }, vendor: { type: 'string', default: 'openai' } },
});
const PHOTOS = Number(opts.photos);
const ROUNDS = Number(opts.rounds);
const VENDOR = opts.vendor as VendorName;
if (!VENDOR_NAMES.includes(VENDOR) || !(PHOTOS >= 1) || !(ROUNDS >= 1)) throw new Error('--vendor openai|anthropic|google, --photos ≥ 1, --rounds ≥ 1');
const MAX_PIXELS = 100_000_000;

// ---- before: the path as it was at 416e2f2 (vendors/resize.ts, images/vendor-pixels.ts) ----------

/** The work copy's size as it was: the largest of every vendor's billed sizes (Google's 1536 px for these photos). */
function allVendorsSize(source: Size): Size {
  return VENDOR_NAMES.map((v) => billedSize(v, source.width, source.height)).reduce((a, b) => (b.width * b.height > a.width * a.height ? b : a));
}

async function beforeCopy(bytes: Buffer): Promise<WorkCopy> {
  const meta = await sharp(bytes).metadata();
  const source = meta.autoOrient ?? { width: meta.width, height: meta.height };
  const size = allVendorsSize(source);
  let pipeline = sharp(bytes, { limitInputPixels: MAX_PIXELS, failOn: 'error' }).autoOrient();
  if (size.width !== source.width || size.height !== source.height) pipeline = pipeline.resize(size.width, size.height, { fit: 'fill' });
  const { data, info } = await pipeline.flatten({ background: '#ffffff' }).removeAlpha().toColourspace('srgb').raw({ depth: 'uchar' }).toBuffer({ resolveWithObject: true });
  return { pixels: data, width: info.width, height: info.height, source };
}

async function beforeUpload(copy: WorkCopy): Promise<Buffer> {
  const target = billedSize(VENDOR, copy.source.width, copy.source.height);
  let pipeline = sharp(copy.pixels, { raw: { width: copy.width, height: copy.height, channels: 3 } });
  if (target.width !== copy.width || target.height !== copy.height) pipeline = pipeline.resize(target.width, target.height, { fit: 'fill' });
  return pipeline.flatten({ background: '#ffffff' }).jpeg({ quality: 85 }).toBuffer();
}

async function before(bytes: Buffer): Promise<{ upload: Buffer; pHash: string; dHash: string }> {
  const [copy, hashes] = await Promise.all([beforeCopy(bytes), decodeCheckedHashes(bytes, MAX_PIXELS)]);
  return { upload: await beforeUpload(copy), ...hashes };
}

// ---- after: the worker's own entry points ---------------------------------------------------------

/**
 * One cache for the run, as the worker keeps one (creating it allocates its 100,000-entry hash
 * table: 17 ms, once per process), each call under a key of its own so it finds nothing kept, as a
 * new photo does; bounded to one copy, so the copies do not pile up.
 */
const bytesOf = new Map<string, Buffer>();
const workCopies = createWorkCopies({ read: async (key) => bytesOf.get(key)!, maxBytes: 12 << 20, maxPixels: MAX_PIXELS });
let calls = 0;

async function after(bytes: Buffer): Promise<{ upload: Buffer; pHash: string; dHash: string }> {
  const key = `${String(++calls).padStart(8, '0')}${'0'.repeat(56)}`;
  bytesOf.set(key, bytes);
  try {
    const { copy, hashes } = await workCopies.withHashes(key, VENDOR);
    const prepared = await prepareImage(VENDOR, copy);
    return { upload: prepared.data, ...hashes };
  } finally {
    bytesOf.delete(key);
  }
}

// ---- the path just before the per-vendor copy: the all-vendor copy, today's encode ----------------

async function allVendorCopy(bytes: Buffer): Promise<unknown> {
  const [copy] = await Promise.all([beforeCopy(bytes), decodeCheckedHashes(bytes, MAX_PIXELS)]);
  return prepareImage(VENDOR, copy);
}

// ---- the parts -------------------------------------------------------------------------------------

/** Each photo's copies made ahead, for the parts that start from one: as it was (the largest billed size) and now (the vendor's). */
interface Copies {
  before: WorkCopy;
  after: WorkCopy;
}

const contenders: Record<string, { what: string; run: (bytes: Buffer, copy: Copies) => Promise<unknown> }> = {
  before: { what: 'the path at 416e2f2: work copy at the largest billed size + hashes (side by side), then the upload from the copy', run: (b) => before(b) },
  after: { what: "the path now: workCopies.withHashes (the copy at the vendor's billed size), then prepareImage from the copy", run: (b) => after(b) },
  'all-vendor copy': { what: "the path just before the copy was sized per vendor: copy at the largest billed size + hashes, then prepareImage", run: (b) => allVendorCopy(b) },
  'copy decode before': { what: 'the work copy alone as it was (decode, resize to the largest billed size, raw)', run: (b) => beforeCopy(b) },
  'copy decode after': { what: "the work copy alone now (makeWorkCopy: decode, resize to the vendor's billed size, raw)", run: (b) => makeWorkCopy(b, VENDOR, MAX_PIXELS) },
  'hash decode': { what: 'the perceptual hashes alone (shrink-on-load decode to 288×256, grey, pHash, dHash)', run: (b) => decodeCheckedHashes(b, MAX_PIXELS) },
  'upload before': { what: 'the upload from a copy as it was (resize + encode, Huffman tables optimised)', run: (_, c) => beforeUpload(c.before) },
  'upload after': { what: "the upload from a copy now (prepareImage of the vendor's copy: the encode alone)", run: (_, c) => prepareImage(VENDOR, c.after) },
  'floor: 1/8 decode': { what: 'sharp(bytes).resize(w/9).raw(): the entropy decode at 1/8 scale, the least any full read costs', run: (b) => sharp(b).resize(300).raw().toBuffer() },
  'not taken: direct': {
    what: 'hashes + the upload decoded straight from the original with shrink-on-load (no work copy: a decode per vendor)',
    run: async (b, c) => {
      const target = billedSize(VENDOR, c.after.source.width, c.after.source.height);
      const upload = sharp(b).autoOrient().resize(target.width, target.height, { fit: 'fill' }).flatten({ background: '#ffffff' }).jpeg({ quality: 85, optimiseCoding: false }).toBuffer();
      return Promise.all([upload, decodeCheckedHashes(b, MAX_PIXELS)]);
    },
  },
};

const lines: string[] = [];
const say = (s: string) => {
  console.log(s);
  lines.push(s);
};
const cpuMs = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

const started = new Date();
const photos = await cameraPhotos(PHOTOS);
const copies: Copies[] = await Promise.all(photos.map(async (b) => ({ before: await beforeCopy(b), after: await makeWorkCopy(b, VENDOR, MAX_PIXELS) })));
say(`bench/photo-cpu.ts, ${started.toISOString()}: ${PHOTOS} photos (${photos.map((b, i) => `${(b.length / 1e6).toFixed(2)} MB ${copies[i]!.before.source.width}×${copies[i]!.before.source.height}`).join(', ')}), ${ROUNDS} rounds, vendor ${VENDOR}`);
say(`node ${process.version}, sharp ${sharp.versions.sharp} / libvips ${sharp.versions.vips}, sharp.concurrency() = ${sharp.concurrency()}, ${os.cpus().length} × ${os.cpus()[0]?.model ?? '?'}, load ${os.loadavg().map((l) => l.toFixed(1)).join(' ')}`);

// Same results first: a faster path that changed a hash, the upload's size, or the upload the
// original itself gives, would be no win.
let same = true;
for (const [i, bytes] of photos.entries()) {
  const [b, a, direct] = [await before(bytes), await after(bytes), await prepareImage(VENDOR, bytes, MAX_PIXELS)];
  const [pb, pa] = await Promise.all([b.upload, a.upload].map((u) => sharp(u).raw().toBuffer({ resolveWithObject: true })));
  const sameSize = pb!.info.width === pa!.info.width && pb!.info.height === pa!.info.height;
  const asOriginal = a.upload.equals(direct.data);
  // Mean absolute difference per channel value between before's upload pixels and after's (0–255).
  const moved = sameSize ? pa!.data.reduce((n, v, k) => n + Math.abs(v - pb!.data[k]!), 0) / pa!.data.length : NaN;
  const ok = b.pHash === a.pHash && b.dHash === a.dHash && sameSize && asOriginal;
  same &&= ok;
  say(
    `photo ${i}: pHash ${a.pHash} dHash ${a.dHash} ${b.pHash === a.pHash && b.dHash === a.dHash ? 'same' : `DIFFERENT (before ${b.pHash} ${b.dHash})`}; ` +
      `upload ${pa!.info.width}×${pa!.info.height}${sameSize ? '' : ` (before ${pb!.info.width}×${pb!.info.height}: DIFFERENT)`}, ` +
      `${asOriginal ? 'byte for byte the upload from the original' : 'NOT the upload from the original'}, pixels ${pb!.data.equals(pa!.data) ? 'identical to' : `${moved.toFixed(2)} levels a value from`} before's, ${b.upload.length} → ${a.upload.length} bytes (${((a.upload.length / b.upload.length - 1) * 100).toFixed(1)} %)`,
  );
}

const names = Object.keys(contenders);
const ms: Record<string, number[]> = Object.fromEntries(names.map((n) => [n, []]));
for (const [i, bytes] of photos.entries()) for (const n of names) await contenders[n]!.run(bytes, copies[i]!); // warm-up
for (let r = 0; r < ROUNDS; r++) {
  for (const [i, bytes] of photos.entries()) {
    const order = names.map((_, k) => names[(k + r + i) % names.length]!);
    for (const n of order) {
      const t = cpuMs();
      await contenders[n]!.run(bytes, copies[i]!);
      ms[n]!.push(cpuMs() - t);
    }
  }
}
say('');
say('| contender | CPU ms per photo (median) | what |');
say('|---|---|---|');
for (const n of names) say(`| ${n} | ${median(ms[n]!).toFixed(1)} | ${contenders[n]!.what} |`);
say('');
const ratio = median(ms.after!) / median(ms.before!);
// Paired: each sample of after over before on the same photo in the same round (photo size and the round's load cancel out).
const paired = (a: string, b: string) => median(ms[a]!.map((x, k) => x / ms[b]![k]!));
say(`after / before = ${ratio.toFixed(2)} (${median(ms.before!).toFixed(1)} → ${median(ms.after!).toFixed(1)} ms of CPU per photo); paired median ${paired('after', 'before').toFixed(2)}; the upload alone ${paired('upload after', 'upload before').toFixed(2)}; the copy's decode alone ${paired('copy decode after', 'copy decode before').toFixed(2)}`);
say(`after / all-vendor copy = ${(median(ms.after!) / median(ms['all-vendor copy']!)).toFixed(2)} (${median(ms['all-vendor copy']!).toFixed(1)} → ${median(ms.after!).toFixed(1)} ms); paired median ${paired('after', 'all-vendor copy').toFixed(2)}`);
say(`same hashes and upload size as before, and the upload byte for byte the original's own, on every photo: ${same ? 'yes' : 'NO'}`);
say(`load at the end ${os.loadavg().map((l) => l.toFixed(1)).join(' ')}`);
const out = fileURLToPath(new URL('results/photo-cpu.txt', import.meta.url));
await mkdir(fileURLToPath(new URL('results/', import.meta.url)), { recursive: true });
await writeFile(out, lines.join('\n') + '\n');
if (!same) process.exitCode = 1;
