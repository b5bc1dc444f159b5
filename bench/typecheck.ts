/**
 * The typecheck that gates `npm test`, TypeScript 5.9 against TypeScript 7 (the native compiler),
 * on this project (npx tsx bench/typecheck.ts [runs=3]): `tsc --noEmit -p tsconfig.json` with each,
 * interleaved so a busy machine slows both alike; medians. Writes bench/results/typecheck.txt.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const RUNS = Number(process.argv[2] ?? 3);
const compilers = {
  'TypeScript 5.9 (typescript)': path.join(ROOT, 'node_modules/typescript/bin/tsc'),
  'TypeScript 7 (typescript-7)': path.join(ROOT, 'node_modules/typescript-7/bin/tsc'),
};
const times: Record<string, number[]> = Object.fromEntries(Object.keys(compilers).map((k) => [k, []]));
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const lines: string[] = [];
const say = (s: string) => {
  console.log(s);
  lines.push(s);
};

say(`typecheck bench, ${new Date().toISOString().slice(0, 10)}, node ${process.version}, ${os.cpus().length} cores, load ${os.loadavg()[0]!.toFixed(1)}; ${RUNS} interleaved runs each of tsc --noEmit -p tsconfig.json`);
for (const [name, bin] of Object.entries(compilers)) say(`${name}: ${execFileSync(process.execPath, [bin, '--version'], { encoding: 'utf8' }).trim()}`);
for (let r = 0; r < RUNS; r++) {
  for (const [name, bin] of Object.entries(compilers)) {
    const t0 = performance.now();
    const run = spawnSync(process.execPath, [bin, '--noEmit', '-p', 'tsconfig.json'], { cwd: ROOT, encoding: 'utf8' });
    if (run.status !== 0) throw new Error(`${name} failed:\n${run.stdout}${run.stderr}`);
    times[name]!.push(performance.now() - t0);
  }
}
for (const [name, xs] of Object.entries(times)) say(`${name.padEnd(28)} median ${(median(xs) / 1000).toFixed(1)} s  (runs: ${xs.map((x) => (x / 1000).toFixed(1)).join(', ')})`);
const [old, native] = Object.values(times).map(median) as [number, number];
say(`TypeScript 7 / TypeScript 5.9: ${(native / old).toFixed(2)}×`);
writeFileSync(path.join(ROOT, 'bench/results/typecheck.txt'), lines.join('\n') + '\n');
