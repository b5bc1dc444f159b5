import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getBalance } from '../../credits/ledger.ts';
import { VEHICLE_REPORT_CREDITS } from '../../credits/price-book.ts';
import { createTestAccount } from '../helpers/app.ts';
import { PHOTOS_DIR } from '../helpers/photos.ts';
import { startPipeline, type Pipeline } from '../helpers/pipeline.ts';

/**
 * A mainstream TypeScript generator other than the one @lenstack/client uses (@hey-api/openapi-ts,
 * with its fetch client), run on the committed document as an outside developer would: it must
 * generate without error, the output must typecheck strictly together with a small program, and
 * that program must run analyze → lookup → photo batch → vehicle batch → items → export against
 * the API, each output non-empty once decoded.
 */
const run = promisify(execFile);
const ROOT = fileURLToPath(new URL('../..', import.meta.url));
let p: Pipeline;
let baseUrl: string;
let dir: string;
beforeAll(async () => {
  p = await startPipeline();
  baseUrl = await p.app.listen({ port: 0, host: '127.0.0.1' });
  dir = await mkdtemp(join(tmpdir(), 'lenstack-hey-api-'));
}, 120_000);
afterAll(async () => {
  await p?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

const PROGRAM = `import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createClient } from './client/client/index.js';
import { analyzeV1, createBatch, exportBatch, getBatch, listBatchItems, lookupByImage } from './client/sdk.gen.js';
import type { Batch, BatchItem, PhotoOutput, VehicleReportOutput } from './client/types.gen.js';

const client = createClient({ baseUrl: process.env.LENSTACK_BASE_URL!, headers: { Authorization: \`Bearer \${process.env.LENSTACK_API_KEY}\` } });
const photo = (name: string) => readFileSync(join(process.env.LENSTACK_PHOTOS!, name)).toString('base64');
const must = <T>(r: { data?: T; error?: unknown }): T => {
  if (r.data === undefined) throw new Error(JSON.stringify(r.error));
  return r.data;
};
const filled = (what: string, v: unknown) => {
  if (!v || JSON.stringify(v) === '{}') throw new Error(\`\${what} is empty\`);
};
async function finished(id: string): Promise<Batch> {
  for (let polls = 0; polls < 400; polls++) {
    const b = must(await getBatch({ client, path: { batchId: id } }));
    if (b.status !== 'running') return b;
    await new Promise((r) => setTimeout(r, 500));
  }
  throw new Error(\`batch \${id} still running after 200 s\`);
}
async function items(id: string): Promise<BatchItem[]> {
  return must(await listBatchItems({ client, path: { batchId: id }, query: { limit: 100 } })).items;
}

const canon = photo('Canon_40D.jpg');
const analysis = must(await analyzeV1({ client, body: { imageBase64: canon, modules: ['dating', 'describe'] } }));
const output = analysis.output as PhotoOutput;
filled('estimatedDate', output.estimatedDate);
filled('caption', output.caption);
const lookup = must(await lookupByImage({ client, body: { images_base64: [canon] } }));
const match = Object.values(lookup.results)[0]!;
filled('lookup photo', match.photo);

const photos = must(await createBatch({ client, body: { items: [{ base64: photo('Nikon_D70.jpg'), name: 'nikon.jpg' }, { base64: photo('Pentax_K10D.jpg'), name: 'pentax.jpg' }], modules: ['dating'] } }));
const photoBatch = await finished(photos.id);
const photoItems = await items(photos.id);
for (const item of photoItems) filled(\`item \${item.index}\`, (item.output as PhotoOutput | null)?.estimatedDate);

const vin = 'WDB2030461A123456';
const vehicles = must(await createBatch({ client, body: { vehicles: [{ vehicle: { vin }, items: [{ base64: photo('Nikon_D70.jpg') }, { base64: photo('Pentax_K10D.jpg') }] }] } }));
const vehicleBatch = await finished(vehicles.id);
const [report] = (await items(vehicles.id)).map((i) => i.output as VehicleReportOutput);
filled('overallCondition', report!.overallCondition);
filled('componentGrades', report!.componentGrades);
const csv = must(await exportBatch({ client, path: { batchId: vehicles.id }, query: { format: 'csv' }, parseAs: 'text' })) as unknown as string;
console.log(JSON.stringify({
  analysis: analysis.usage.creditsCharged,
  match: match.matchType,
  photoBatch: [photoBatch.status, photoItems.length],
  vehicleBatch: [vehicleBatch.status, report!.reportId.length > 0],
  exportHasVin: csv.includes(vin),
}));
`;

describe('@hey-api/openapi-ts on openapi/lenstack.json', () => {
  it('generates, typechecks strictly with a program, and that program runs every kind of call against the API', async () => {
    await run(process.execPath, [join(ROOT, 'node_modules/@hey-api/openapi-ts/bin/run.js'), '-i', join(ROOT, 'openapi/lenstack.json'), '-o', join(dir, 'client')], { cwd: dir });
    await writeFile(join(dir, 'program.ts'), PROGRAM);
    await writeFile(join(dir, 'package.json'), JSON.stringify({ type: 'module', private: true }));
    await writeFile(join(dir, 'tsconfig.json'), JSON.stringify({ compilerOptions: { module: 'nodenext', moduleResolution: 'nodenext', target: 'es2022', lib: ['es2022', 'dom'], strict: true, noEmit: true, types: ['node'], typeRoots: [join(ROOT, 'node_modules/@types')] }, include: ['program.ts', 'client/**/*.ts'] }));
    const typecheck = await run(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', dir]).catch((err: { stdout: string }) => ({ stdout: err.stdout, failed: true }));
    expect(typecheck.stdout).toBe('');

    const user = await createTestAccount(p.db, { community: 100 });
    const { stdout } = await run(join(ROOT, 'node_modules/.bin/tsx'), ['program.ts'], { cwd: dir, timeout: 240_000, env: { ...process.env, LENSTACK_BASE_URL: baseUrl, LENSTACK_API_KEY: user.liveKey, LENSTACK_PHOTOS: PHOTOS_DIR } });
    expect(JSON.parse(stdout)).toEqual({ analysis: 2, match: 'exact', photoBatch: ['completed', 2], vehicleBatch: ['completed', true], exportHasVin: true });
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 100 - 2 - 2 - VEHICLE_REPORT_CREDITS, reserved: 0 });
  }, 300_000);
});
