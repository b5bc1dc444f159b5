/**
 * A fleet folder through the CLI (npx tsx bench/fleet.ts [small=12] [large=36]): `lenstack batch`
 * as a child process, as a user runs it, on folders of generated 3–5 MB photos (a fixture photo
 * enlarged to 5 MP with sensor-like noise: JPEG sizes of a phone camera), against the stack of the
 * batch benches with the simulated vendors at 800 ms latency, lens `dating`.
 *
 * - Wall time against the larger of the two ideals: uploading the bytes at the speed this machine
 *   moves them over loopback HTTP (measured: the same files, four streams, into a discarding
 *   server), and analyzing: photos × 800 ms ÷ the batch's concurrency. The CLI uploads, then
 *   submits, so wall ≥ the sum; the ratio to the larger says what the rest costs.
 * - Peak RSS of the CLI (GNU time's maximum resident set) at both sizes: it should not grow with
 *   the folder (files are streamed, never whole in memory).
 * - Resume: a run of the large folder killed (SIGKILL) once half its uploads finished, then the
 *   same command again, through a proxy counting every PATCH byte: bytes sent ÷ the folder's bytes
 *   (1.00 = nothing sent twice), and the batches made (1).
 *
 * Writes bench/results/fleet-{small}-{large}.txt.
 */
import { spawn } from 'node:child_process';
import { createServer, request as httpRequest } from 'node:http';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import sharp from 'sharp';
import { issueKey } from '../auth/repository.ts';
import { createUser } from '../accounts/billing-accounts.ts';
import { BATCH_CONCURRENCY } from '../batches/submit.ts';
import { grant } from '../credits/ledger.ts';
import { startBatchStack } from './batch-stack.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const BIN = path.join(ROOT, 'clients/cli/bin/lenstack.js');
const SMALL = Number(process.argv[2] ?? 12);
const LARGE = Number(process.argv[3] ?? 36);
const LATENCY_MS = 800;
const lines: string[] = [];
const say = (s: string) => {
  console.log(s);
  lines.push(s);
};

/** `count` distinct 2560×1920 JPEGs from a fixture with noise, numbered from `from` (a block pattern makes each distinct). */
async function cameraLikePhotos(dir: string, from: number, count: number): Promise<number> {
  await mkdir(dir, { recursive: true });
  const source = path.join(ROOT, 'test/fixtures/photos/gps-DSCN0010.jpg');
  const { data, info } = await sharp(source).resize(2560, 1920).raw().toBuffer({ resolveWithObject: true });
  let bytes = 0;
  let x = 12345;
  for (let i = from; i < from + count; i++) {
    const px = Buffer.from(data);
    for (let j = 0; j < px.length; j++) {
      x = (Math.imul(x, 1103515245) + 12345) >>> 0;
      px[j] = Math.max(0, Math.min(255, px[j]! + ((x >>> 24) % 61) - 30));
    }
    for (let bit = 0; bit < 16; bit++) {
      const v = (i >> bit) & 1 ? 255 : 0;
      for (let y = 0; y < 32; y++) for (let c = 0; c < 32; c++) px.set([v, v, v], (y * info.width + bit * 32 + c) * 3);
    }
    const jpeg = await sharp(px, { raw: info }).jpeg({ quality: 95 }).toBuffer();
    await writeFile(path.join(dir, `IMG_${String(i).padStart(4, '0')}.jpg`), jpeg);
    bytes += jpeg.length;
  }
  return bytes;
}

interface CliRun { code: number | null; signal: NodeJS.Signals | null; ms: number; maxRssKb: number | null; stdout: string; stderr: string; /** When the batch was submitted (its answer arrived): uploads and the API's intake are done. */ submittedMs: number | null }

function runCli(args: string[], env: Record<string, string>, opts: { onSpawn?: (kill: () => void) => void } = {}): Promise<CliRun> {
  const t0 = performance.now();
  // GNU time reports the child's maximum resident set size (KiB) on its last stderr line; a run
  // that is to be killed is the CLI itself, so the kill reaches it.
  const command = opts.onSpawn ? [process.execPath, BIN, ...args] : ['/usr/bin/time', '-f', 'maxrss=%M', process.execPath, BIN, ...args];
  const child = spawn(command[0]!, command.slice(1), { env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env } });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c) => (stdout += c));
  let submittedMs: number | null = null;
  child.stderr.on('data', (c) => {
    stderr += c;
    if (submittedMs === null && / submitted \(/.test(stderr)) submittedMs = performance.now() - t0;
  });
  opts.onSpawn?.(() => child.kill('SIGKILL'));
  return new Promise((resolve) => {
    child.on('close', (code, signal) => {
      const rss = stderr.match(/maxrss=(\d+)/);
      resolve({ code, signal, ms: performance.now() - t0, maxRssKb: rss ? Number(rss[1]) : null, stdout, stderr, submittedMs });
    });
  });
}

/** Loopback HTTP into a server that discards: what moving these bytes costs here, four streams at once. */
async function loopbackSeconds(files: string[]): Promise<number> {
  const sink = createServer((req, res) => {
    req.resume();
    req.on('end', () => res.end());
  });
  await new Promise<void>((r) => sink.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(sink.address() as AddressInfo).port}/`;
  const t0 = performance.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: 4 }, async () => {
      while (next < files.length) {
        const body = await readFile(files[next++]!);
        await fetch(url, { method: 'PATCH', body });
      }
    }),
  );
  const s = (performance.now() - t0) / 1000;
  sink.close();
  return s;
}

/** A proxy counting the bytes of every PATCH on their way to the API. */
async function countingProxy(target: string): Promise<{ url: string; bytes: () => number; close: () => void }> {
  let bytes = 0;
  const server = createServer((req, res) => {
    const up = httpRequest(new URL(req.url!, target), { method: req.method, headers: req.headers }, (answer) => {
      res.writeHead(answer.statusCode!, answer.headers);
      answer.pipe(res);
    });
    up.on('error', () => res.destroy());
    res.on('close', () => {
      if (!res.writableFinished) up.destroy();
    });
    req.on('data', (c: Buffer) => {
      if (req.method === 'PATCH') bytes += c.length;
    });
    req.pipe(up);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    bytes: () => bytes,
    close: () => {
      server.closeAllConnections();
      server.close();
    },
  };
}

const stack = await startBatchStack('fleet');
const work = await mkdtemp(path.join(os.tmpdir(), 'lenstack-fleet-'));
try {
  stack.sim.setBehaviour('all', { latencyMs: LATENCY_MS });
  const newKey = async (name: string) => {
    const { userId } = await createUser(stack.db, `bench-fleet-${name}-${process.pid}@example.test`);
    await grant(stack.db, { userId, pool: 'purchased', amount: 1_000_000, idempotencyKey: 'bench' });
    return { userId, key: (await issueKey(stack.db, userId, 'live')).key };
  };
  say(`fleet bench, ${new Date().toISOString().slice(0, 10)}, node ${process.version}, ${os.cpus().length} cores; vendor latency ${LATENCY_MS} ms, batch concurrency ${BATCH_CONCURRENCY}, lens dating`);

  const sizes: Array<{ n: number; rssKb: number | null }> = [];
  for (const [i, n] of [SMALL, LARGE].entries()) {
    const dir = path.join(work, `fleet-${n}`);
    const bytes = await cameraLikePhotos(dir, i * 10_000, n);
    const files = Array.from({ length: n }, (_, j) => path.join(dir, `IMG_${String(i * 10_000 + j).padStart(4, '0')}.jpg`));
    const upIdeal = await loopbackSeconds(files);
    const anIdeal = (n * LATENCY_MS) / BATCH_CONCURRENCY / 1000;
    const { key } = await newKey(`run${n}`);
    const run = await runCli(['batch', dir, '--lens', 'dating', '--json'], { LENSTACK_API_KEY: key, LENSTACK_BASE_URL: stack.base });
    if (run.code !== 0) throw new Error(`lenstack exited ${run.code}: ${run.stderr}`);
    const result = JSON.parse(run.stdout) as { batch: { counts: { done: number; total: number } } };
    const wall = run.ms / 1000;
    const ideal = Math.max(upIdeal, anIdeal);
    say(`${n} photos, ${(bytes / 1024 ** 2).toFixed(0)} MiB (${(bytes / n / 1024 ** 2).toFixed(1)} MiB each): done ${result.batch.counts.done}/${result.batch.counts.total}; wall ${wall.toFixed(1)} s (hash + upload + submission with the API's intake ${((run.submittedMs ?? 0) / 1000).toFixed(1)} s, then analysis ${((run.ms - (run.submittedMs ?? 0)) / 1000).toFixed(1)} s); ideals: upload ${upIdeal.toFixed(1)} s (loopback), analysis ${anIdeal.toFixed(1)} s → ${(wall / ideal).toFixed(2)}× the larger; CLI peak RSS ${run.maxRssKb ? `${(run.maxRssKb / 1024).toFixed(0)} MB` : 'n/a'}`);
    sizes.push({ n, rssKb: run.maxRssKb });
  }
  if (sizes[0]!.rssKb && sizes[1]!.rssKb) say(`CLI peak RSS ${sizes[1]!.n} over ${sizes[0]!.n} photos: ${(sizes[1]!.rssKb / sizes[0]!.rssKb).toFixed(2)}×`);

  // Resume: the large folder again (new photos, new account), killed once half its uploads finished.
  const dir = path.join(work, 'resume');
  const bytes = await cameraLikePhotos(dir, 20_000, LARGE);
  const { userId, key } = await newKey('resume');
  const proxy = await countingProxy(stack.base);
  try {
    const env = { LENSTACK_API_KEY: key, LENSTACK_BASE_URL: proxy.url };
    let kill!: () => void;
    const killed = runCli(['batch', dir, '--lens', 'dating', '--json'], env, { onSpawn: (k) => (kill = k) });
    const finished = async () => (await stack.db.query<{ n: number }>('SELECT count(*)::int AS n FROM uploads WHERE user_id = $1 AND finished_at IS NOT NULL', [userId])).rows[0]!.n;
    while ((await finished()) < LARGE / 2) await new Promise((r) => setTimeout(r, 50));
    kill();
    const first = await killed;
    const sentBefore = proxy.bytes();
    const again = await runCli(['batch', dir, '--lens', 'dating', '--json'], env);
    if (again.code !== 0) throw new Error(`lenstack exited ${again.code}: ${again.stderr}`);
    const batches = (await stack.db.query<{ n: number }>('SELECT count(*)::int AS n FROM batches WHERE user_id = $1', [userId])).rows[0]!.n;
    const done = (JSON.parse(again.stdout) as { batch: { counts: { done: number } } }).batch.counts.done;
    say(`resume: ${LARGE} photos, ${(bytes / 1024 ** 2).toFixed(0)} MiB; killed (${first.signal ?? first.code}) after ${(sentBefore / 1024 ** 2).toFixed(0)} MiB sent, the same command again: ${(proxy.bytes() / 1024 ** 2).toFixed(0)} MiB sent in all → ${(proxy.bytes() / bytes).toFixed(3)}× the folder's bytes; batches ${batches}, done ${done}/${LARGE}`);
  } finally {
    proxy.close();
  }
  await writeFile(path.join(ROOT, `bench/results/fleet-${SMALL}-${LARGE}.txt`), `${lines.join('\n')}\n`);
} finally {
  await rm(work, { recursive: true, force: true });
  await stack.close();
}
