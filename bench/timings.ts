/**
 * The latency figures the tests no longer assert (a loaded 2-core machine would fail a wall-clock
 * bound by design; the tests keep the correctness half). Each is measured here, a few rounds, and
 * written to bench/results/timings.txt:
 *
 * - image fetch deadline: a server that never answers, `timeoutMs` 300 (test/images/ssrf.test.ts);
 * - DNS deadline: six lookups against a silent resolver, two query slots, deadline 1 s, c-ares
 *   timeout 5 s (test/security/dns.test.ts);
 * - key eviction: a revoked key leaving another process's key cache over Redis pub/sub, from the
 *   publish answering to the entry being gone (test/security/revocation-race.test.ts,
 *   test/accounts/revocation-processes.test.ts, test/web/console.test.ts).
 *
 * Usage: npx tsx bench/timings.ts [--rounds 20]   (REDIS_URL, default redis://127.0.0.1:6379)
 * Under a minute on an idle machine.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';
import { KeyCache } from '../auth/cache.ts';
import { EvictionBus } from '../auth/eviction-bus.ts';
import { createResolver } from '../images/dns.ts';
import { fetchImage } from '../images/fetch.ts';
import { startDnsServer } from '../test/security/dns-server.ts';

const arg = process.argv.indexOf('--rounds');
const ROUNDS = arg > 0 ? Number(process.argv[arg + 1]) : 20;
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';

function summary(name: string, ms: number[]): string {
  const s = [...ms].sort((a, b) => a - b);
  const at = (q: number) => s[Math.min(s.length - 1, Math.floor(q * s.length))]!;
  return `${name.padEnd(44)} n=${s.length}  median ${at(0.5).toFixed(0)} ms  p90 ${at(0.9).toFixed(0)} ms  max ${s[s.length - 1]!.toFixed(0)} ms`;
}

async function fetchDeadline(): Promise<number[]> {
  const sockets = new Set<import('node:net').Socket>();
  const server = http.createServer(() => {}); // reads the request, never answers
  server.on('connection', (s) => sockets.add(s));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/silent`;
  const out: number[] = [];
  try {
    for (let i = 0; i < ROUNDS; i++) {
      const started = performance.now();
      const err = await fetchImage(url, { maxBytes: 1024 * 1024, timeoutMs: 300, allowAddress: () => true }).then(
        () => null,
        (e: Error) => e,
      );
      if (!err || !/within 300 ms/.test(err.message)) throw new Error(`expected the 300 ms deadline, got ${err?.message ?? 'an answer'}`);
      out.push(performance.now() - started);
    }
  } finally {
    for (const s of sockets) s.destroy();
    await new Promise((resolve) => server.close(resolve));
  }
  return out;
}

async function dnsDeadline(): Promise<number[]> {
  const quiet = await startDnsServer({ silent: true });
  const out: number[] = [];
  try {
    for (let i = 0; i < Math.min(ROUNDS, 10); i++) {
      const resolve = createResolver({ servers: [quiet.address], timeoutMs: 5_000, tries: 1, deadlineMs: 1_000, maxInFlight: 2 });
      const started = performance.now();
      const outcomes = await Promise.all(Array.from({ length: 6 }, (_, n) => resolve(`r${i}n${n}.quiet.example`).then(() => 'resolved', (e: { code: string }) => e.code)));
      out.push(performance.now() - started);
      if (outcomes.some((o) => o !== 'ETIMEOUT')) throw new Error(`expected six ETIMEOUT, got ${outcomes.join(',')}`);
    }
  } finally {
    await quiet.close();
  }
  return out;
}

async function eviction(): Promise<number[]> {
  const prefix = `lenstack-bench-timings-${randomUUID()}:`;
  const [revoker, other] = [new KeyCache(), new KeyCache()];
  const busA = await EvictionBus.start(REDIS_URL, prefix, revoker);
  const busB = await EvictionBus.start(REDIS_URL, prefix, other);
  const out: number[] = [];
  try {
    for (let i = 0; i < ROUNDS; i++) {
      const keyHash = randomUUID();
      // The other process's cache is trusted once it hears its own heartbeat; fill it then.
      while (!other.set({ id: `key_${i}`, keyHash, accountId: 'usr_bench', kind: 'live', revoked: false }) || !other.get(keyHash)) {
        await new Promise((r) => setTimeout(r, 10));
      }
      const started = performance.now();
      await busA.publish({ keyHash });
      while (other.get(keyHash) !== undefined) await new Promise((r) => setImmediate(r));
      out.push(performance.now() - started);
    }
  } finally {
    await busA.close();
    await busB.close();
  }
  return out;
}

const lines = [
  `# bench/timings.ts ${new Date().toISOString()}  Node ${process.version}  loadavg ${(await import('node:os')).loadavg().map((l) => l.toFixed(1)).join(' ')}`,
  summary('image fetch deadline (timeoutMs 300)', await fetchDeadline()),
  summary('DNS: 6 lookups, 2 slots, deadline 1 s', await dnsDeadline()),
  summary('key eviction heard by another process', await eviction()),
];
console.log(lines.join('\n'));
mkdirSync(new URL('./results/', import.meta.url), { recursive: true });
writeFileSync(new URL('./results/timings.txt', import.meta.url), `${lines.join('\n')}\n`);
