/**
 * Batch export writers: time and peak memory of a 10,000-row xlsx, csv and json export against a
 * 1,000-row one, each in its own child process (so one run's heap does not carry into the next),
 * interleaved, n runs each; medians. The rows are the dating + describe sandbox outputs with every
 * default column of those lenses, written to a file under bench/out.
 *
 *   npx tsx bench/export.ts [runs=5]     # writes bench/results/export.txt
 */
import { execFileSync } from 'node:child_process';
import { createWriteStream, mkdirSync, statSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { writeCsv, writeJson, writeXlsx, type ExportRow } from '../exports/table.ts';
import { defaultColumnsFor } from '../lenses/columns.ts';
import { sandboxOutput } from '../lenses/fixtures.ts';

const OUT = fileURLToPath(new URL('./out/', import.meta.url));
const LENSES = ['dating', 'describe', 'location', 'people'] as const;

async function child(format: 'xlsx' | 'csv' | 'json', rows: number): Promise<void> {
  const columns = defaultColumnsFor([...LENSES]);
  const output = sandboxOutput([...LENSES]);
  let peak = process.memoryUsage().rss;
  const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 5);
  const baseline = process.memoryUsage().rss;
  async function* source(): AsyncIterable<ExportRow> {
    for (let i = 0; i < rows; i++) {
      // A fresh object per row, as rows read from the database would be.
      yield { index: i, source: `https://photos.example/${i}.jpg`, status: 'done', sha256: i.toString(16).padStart(64, '0'), error: null, result: { output: structuredClone(output) } };
    }
  }
  const file = `${OUT}export-${rows}.${format}`;
  const out = createWriteStream(file);
  const t0 = performance.now();
  if (format === 'xlsx') await writeXlsx(source(), columns, out);
  else if (format === 'csv') await writeCsv(source(), columns, out);
  else await writeJson(source(), out);
  const ms = performance.now() - t0;
  clearInterval(sampler);
  peak = Math.max(peak, process.memoryUsage().rss);
  console.log(JSON.stringify({ ms, peakMb: peak / 2 ** 20, growthMb: (peak - baseline) / 2 ** 20, bytes: statSync(file).size, columns: columns.length }));
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function main(): Promise<void> {
  const runs = Number(process.argv[2] ?? 5);
  mkdirSync(OUT, { recursive: true });
  const cases = (['xlsx', 'csv', 'json'] as const).flatMap((f) => [1_000, 10_000].map((n) => ({ f, n })));
  const results = new Map<string, Array<{ ms: number; peakMb: number; growthMb: number; bytes: number; columns: number }>>();
  for (let r = 0; r < runs; r++) {
    for (const { f, n } of r % 2 ? [...cases].reverse() : cases) {
      const line = execFileSync(process.execPath, ['--import', 'tsx', fileURLToPath(import.meta.url), '--child', f, String(n)], { encoding: 'utf8' }).trim().split('\n').pop()!;
      const key = `${f} ${n}`;
      results.set(key, [...(results.get(key) ?? []), JSON.parse(line)]);
    }
  }
  const lines = [
    `export writers, ${runs} runs each, medians (${new Date().toISOString().slice(0, 10)}, node ${process.version})`,
    `columns: ${results.get('xlsx 1000')![0]!.columns} default columns of ${LENSES.join(', ')} + 5 identity columns`,
    '',
    'format   rows    time ms   rows/s    peak RSS MB   RSS growth MB   file KB',
  ];
  for (const { f, n } of cases) {
    const rs = results.get(`${f} ${n}`)!;
    const ms = median(rs.map((x) => x.ms));
    lines.push(
      `${f.padEnd(8)} ${String(n).padStart(6)}  ${ms.toFixed(0).padStart(8)}  ${String(Math.round((n / ms) * 1000)).padStart(7)}  ${median(rs.map((x) => x.peakMb)).toFixed(1).padStart(12)}  ${median(rs.map((x) => x.growthMb)).toFixed(1).padStart(14)}  ${(median(rs.map((x) => x.bytes)) / 1024).toFixed(0).padStart(8)}`,
    );
  }
  lines.push('');
  for (const f of ['xlsx', 'csv', 'json'] as const) {
    const a = results.get(`${f} 1000`)!;
    const b = results.get(`${f} 10000`)!;
    lines.push(`${f}: peak RSS 10,000 rows / 1,000 rows = ${(median(b.map((x) => x.peakMb)) / median(a.map((x) => x.peakMb))).toFixed(2)}×; time ratio ${(median(b.map((x) => x.ms)) / median(a.map((x) => x.ms))).toFixed(1)}× for 10× the rows`);
  }
  const text = lines.join('\n') + '\n';
  console.log(text);
  writeFileSync(fileURLToPath(new URL('./results/export.txt', import.meta.url)), text);
}

if (process.argv[2] === '--child') await child(process.argv[3] as 'xlsx' | 'csv' | 'json', Number(process.argv[4]));
else await main();
