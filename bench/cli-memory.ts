/**
 * The CLI's memory against the size of the fleet (issue 22): what `lenstack batch --vehicles`
 * holds must not grow with the number of photos.
 *
 *   npx tsx bench/cli-memory.ts [--vehicles 20,200] [--photos 25] [--kb 32] [--bin <lenstack.js>] [--tag name]
 *
 * The stack is bench/batch-stack.ts (a fresh database, a Temporal dev server, the simulated vendor
 * at 0 ms, an in-process worker and the API on a port, no rate limits), in this process; the CLI
 * is a child process, so its figures are its own. For each size, a folder of V vehicle
 * sub-folders of P photos and a vehicles.csv: every photo the small fixture Canon_40D.jpg (8 KB)
 * with a JPEG COM segment after SOI carrying its number (a new SHA-256, so a new upload, blob and
 * analysis each) and COM segments of filler up to about --kb KB (bytes to send and hash, no more
 * pixels to decode). Small photos on purpose: what is measured is what grows per photo, and the
 * worker gets through thousands of them in minutes.
 *
 * The run is `lenstack batch --vehicles <folder> --json` under GNU time (peak RSS, CPU), with
 * bench/cli-memory-probe.ts loaded into it (`--import`): peak heap in use, peak external and
 * ArrayBuffer memory (sampled every 10 ms), and the largest heap in use just after a full
 * collection, which is about what the CLI holds live. It forces no collection. Before the sizes,
 * `lenstack --help` under GNU time gives the floor: Node, tsx and the CLI's modules.
 *
 * Prints each size, then the largest over the smallest as ratios and the growth per photo.
 * Writes bench/results/cli-memory-{V1,V2…}x{P}x{kb}kb[-tag].txt. `--bin` runs another CLI (another
 * commit's clients/cli, extracted inside this checkout so it finds node_modules; .data/ is ignored):
 *   git archive <commit> clients/cli | tar -x -C .data/cli-<commit>
 *   npx tsx bench/cli-memory.ts --bin .data/cli-<commit>/clients/cli/bin/lenstack.js --tag <commit>
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, open, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { startBatchStack } from './batch-stack.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const PROBE = path.join(ROOT, 'bench/cli-memory-probe.ts');
const FIXTURE = path.join(ROOT, 'test/fixtures/photos/Canon_40D.jpg');
const { values: opts } = parseArgs({
  options: {
    vehicles: { type: 'string', default: '20,200' },
    photos: { type: 'string', default: '25' },
    kb: { type: 'string', default: '32' },
    bin: { type: 'string', default: path.join(ROOT, 'clients/cli/bin/lenstack.js') },
    tag: { type: 'string' },
  },
});
const BIN = path.resolve(opts.bin);
const SIZES = opts.vehicles.split(',').map(Number);
const P = Number(opts.photos);
const KB = Number(opts.kb);
if (SIZES.some((v) => !Number.isInteger(v) || v < 1 || v > 1000) || !Number.isInteger(P) || P < 1 || P > 50 || SIZES.some((v) => v * P > 10_000)) {
  throw new Error('--vehicles takes sizes from 1 to 1000 (comma-separated), --photos 1 to 50, at most 10,000 photos a size (a batch\'s limits)');
}
if (!Number.isInteger(KB) || KB < 8 || KB > 8192) throw new Error('--kb takes 8 to 8192');

const lines: string[] = [];
const say = (s: string) => {
  console.log(s);
  lines.push(s);
};
const mb = (b: number) => (b / 1024 ** 2).toFixed(1);
const load = () => os.loadavg().map((l) => l.toFixed(1)).join(' ');

/** COM segments (FF FE, length, bytes) carrying `body`, split at the segment's 65,533-byte bound. */
function comSegments(body: Buffer): Buffer[] {
  const out: Buffer[] = [];
  for (let at = 0; at < body.length; at += 65_533) {
    const part = body.subarray(at, at + 65_533);
    const head = Buffer.from([0xff, 0xfe, 0, 0]);
    head.writeUInt16BE(part.length + 2, 2);
    out.push(head, part);
  }
  return out;
}

/** The fleet folder: V sub-folders of P photos and vehicles.csv; returns its photo bytes. */
async function writeFleet(dir: string, vehicles: number, jpeg: Buffer, filler: Buffer[]): Promise<number> {
  await mkdir(dir, { recursive: true });
  const nonce = randomBytes(8).toString('hex');
  const csv = ['folder,vin,mileage,make,model,year'];
  let bytes = 0;
  for (let v = 0; v < vehicles; v++) {
    const folder = `vehicle-${String(v).padStart(4, '0')}`;
    await mkdir(path.join(dir, folder));
    csv.push(`${folder},BENCH${String(v).padStart(12, '0')},${10_000 + v},Bench,Fleet,2020`);
    for (let p = 0; p < P; p++) {
      const parts = [jpeg.subarray(0, 2), ...comSegments(Buffer.from(`lenstack cli-memory bench photo ${v}-${p} ${nonce}`)), ...filler, jpeg.subarray(2)];
      const fh = await open(path.join(dir, folder, `IMG_${String(p).padStart(4, '0')}.jpg`), 'w');
      try {
        await fh.writev(parts);
      } finally {
        await fh.close();
      }
      bytes += parts.reduce((n, b) => n + b.length, 0);
    }
  }
  await writeFile(path.join(dir, 'vehicles.csv'), `${csv.join('\n')}\n`);
  return bytes;
}

interface Probe { spacesAtPeak: Record<string, number>; rss: number; heapUsed: number; heapCommitted: number; external: number; arrayBuffers: number; liveAfterFullGc: number; fullGcs: number; rssAtMs: number; heapUsedAtMs: number; exitAtMs: number }
interface Run { code: number | null; ms: number; maxRssKb: number; cpuS: number; probe: Probe | null; stdout: string; stderr: string }

/** The CLI under GNU time (peak RSS in KiB, CPU), the probe loaded into it. */
async function runCli(args: string[], env: Record<string, string>, probeFile: string): Promise<Run> {
  const t0 = performance.now();
  const child = spawn('/usr/bin/time', ['-f', 'maxrss=%M user=%U sys=%S', process.execPath, '--import', PROBE, BIN, ...args], {
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', LENSTACK_MEMORY_PROBE: probeFile, ...env },
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c) => (stdout += c));
  child.stderr.on('data', (c) => (stderr += c));
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  const t = /maxrss=(\d+) user=([\d.]+) sys=([\d.]+)/.exec(stderr);
  if (!t) throw new Error(`no GNU time line from the CLI (${code}): ${stderr.slice(-2000)}`);
  const probe = await readFile(probeFile, 'utf8').then((s) => JSON.parse(s) as Probe, () => null);
  return { code, ms: performance.now() - t0, maxRssKb: Number(t[1]), cpuS: Number(t[2]) + Number(t[3]), probe, stdout, stderr };
}

const head = await new Promise<string>((resolve) => {
  const git = spawn('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT });
  let out = '';
  git.stdout.on('data', (c) => (out += c));
  git.on('close', () => resolve(out.trim()));
});
const work = await mkdtemp(path.join(os.tmpdir(), 'lenstack-cli-memory-'));
const stack = await startBatchStack('cli_memory');
try {
  stack.sim.setBehaviour('all', { latencyMs: 0 });
  const jpeg = await readFile(FIXTURE);
  const fillBytes = Math.max(0, KB * 1024 - jpeg.length - 64);
  const filler = fillBytes > 0 ? comSegments(randomBytes(fillBytes)) : [];
  const env = { LENSTACK_API_KEY: stack.key, LENSTACK_BASE_URL: stack.base };
  say(`CLI memory bench (lenstack batch --vehicles), ${new Date().toISOString()}, commit ${head}${opts.tag ? ` (the CLI: ${opts.tag}, ${path.relative(ROOT, BIN)})` : ''}, node ${process.version}, ${os.cpus().length} cores (${os.cpus()[0]?.model ?? '?'}), load average ${load()}`);

  const floor = await runCli(['--help'], env, path.join(work, 'probe-help.json'));
  say(`floor (lenstack --help): peak RSS ${mb(floor.maxRssKb * 1024)} MiB, heap in use ${mb(floor.probe?.heapUsed ?? 0)} MiB`);

  const results: Array<{ photos: number; run: Run }> = [];
  for (const v of SIZES) {
    const photos = v * P;
    const dir = path.join(work, `fleet-${v}`);
    const bytes = await writeFleet(dir, v, jpeg, filler);
    const loadBefore = load();
    const run = await runCli(['batch', '--vehicles', dir, '--json'], env, path.join(work, `probe-${v}.json`));
    if (run.code !== 0) throw new Error(`lenstack exited ${run.code}: ${run.stderr.slice(-3000)}`);
    const result = JSON.parse(run.stdout) as { batch: { counts: { done: number; failed: number; total: number } } };
    const p = run.probe;
    say('');
    say(`${v} vehicles × ${P} photos = ${photos} photos of ${(bytes / photos / 1024).toFixed(0)} KiB (${mb(bytes)} MiB); load average ${loadBefore} at the start, ${load()} at the end`);
    say(`  done ${result.batch.counts.done}/${result.batch.counts.total} vehicles, failed ${result.batch.counts.failed}; wall ${(run.ms / 1000).toFixed(1)} s, CLI CPU ${run.cpuS.toFixed(1)} s`);
    say(`  CLI peak RSS ${mb(run.maxRssKb * 1024)} MiB; V8's heap held from the system at most ${p ? mb(p.heapCommitted) : '?'} MiB; heap in use: peak ${p ? mb(p.heapUsed) : '?'} MiB, after a full collection at most ${p ? mb(p.liveAfterFullGc) : '?'} MiB (${p?.fullGcs ?? '?'} full collections); external peak ${p ? mb(p.external) : '?'} MiB, of it ArrayBuffers ${p ? mb(p.arrayBuffers) : '?'} MiB`);
    if (p) say(`  V8's spaces when it held the most (MiB): ${Object.entries(p.spacesAtPeak).map(([k, v]) => `${k} ${v.toFixed(1)}`).join(', ')}`);
    if (p) say(`  the peaks came ${((p.exitAtMs - p.rssAtMs) / 1000).toFixed(1)} s (RSS) and ${((p.exitAtMs - p.heapUsedAtMs) / 1000).toFixed(1)} s (heap) before the CLI exited, ${(p.exitAtMs / 1000).toFixed(1)} s after it started`);
    results.push({ photos, run });
    await rm(dir, { recursive: true, force: true });
  }
  if (results.length > 1) {
    const [lo, hi] = [results[0]!, results[results.length - 1]!];
    const per = (a: number, b: number) => `${((b - a) / (hi.photos - lo.photos)).toFixed(0)} bytes a photo`;
    const ratio = (a: number, b: number) => `${(b / a).toFixed(2)}×`;
    say('');
    say(`${hi.photos} over ${lo.photos} photos (${ratio(lo.photos, hi.photos)} the photos):`);
    say(`  peak RSS ${ratio(lo.run.maxRssKb, hi.run.maxRssKb)} (${mb(lo.run.maxRssKb * 1024)} → ${mb(hi.run.maxRssKb * 1024)} MiB; ${per(lo.run.maxRssKb * 1024, hi.run.maxRssKb * 1024)})`);
    if (lo.run.probe && hi.run.probe) {
      const [a, b] = [lo.run.probe, hi.run.probe];
      say(`  V8's heap held ${ratio(a.heapCommitted, b.heapCommitted)} (${mb(a.heapCommitted)} → ${mb(b.heapCommitted)} MiB)`);
      say(`  peak heap in use ${ratio(a.heapUsed, b.heapUsed)} (${mb(a.heapUsed)} → ${mb(b.heapUsed)} MiB; ${per(a.heapUsed, b.heapUsed)})`);
      say(`  heap after a full collection ${ratio(a.liveAfterFullGc, b.liveAfterFullGc)} (${mb(a.liveAfterFullGc)} → ${mb(b.liveAfterFullGc)} MiB; ${per(a.liveAfterFullGc, b.liveAfterFullGc)})`);
      say(`  peak external ${ratio(a.external, b.external)} (${mb(a.external)} → ${mb(b.external)} MiB)`);
    }
  }
  say(`ended ${new Date().toISOString()}, load average ${load()}`);
  await writeFile(path.join(ROOT, `bench/results/cli-memory-${SIZES.join(',')}x${P}x${KB}kb${opts.tag ? `-${opts.tag}` : ''}.txt`), `${lines.join('\n')}\n`);
} finally {
  await stack.close();
  await rm(work, { recursive: true, force: true });
}
