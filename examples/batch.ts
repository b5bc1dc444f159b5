/**
 * Run every photo of a folder through a stack as one batch, follow it, and save a spreadsheet.
 *
 *   LENSTACK_API_KEY=svc_live_… npx tsx examples/batch.ts path/to/folder out.xlsx
 *
 * LENSTACK_BASE_URL defaults to http://localhost:8080 (`npm start`).
 */
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Lenstack, LenstackError } from '@lenstack/client';

const [folder, out = 'batch.xlsx'] = process.argv.slice(2);
if (!folder) {
  console.error('usage: npx tsx examples/batch.ts <folder> [out.xlsx|out.csv|out.json]');
  process.exit(2);
}
const format = out.endsWith('.csv') ? 'csv' : out.endsWith('.json') ? 'json' : 'xlsx';
const lenstack = new Lenstack({ apiKey: process.env.LENSTACK_API_KEY, baseUrl: process.env.LENSTACK_BASE_URL });

try {
  const names = (await readdir(folder)).filter((f) => /\.(jpe?g|png|webp|gif|tiff?|avif|heic|heif|bmp)$/i.test(f)).sort();
  // One file open at a time. A batch is one request of at most 100 MiB of JSON (~75 MB of photos):
  // `npx lenstack batch` checks that first; larger folders go through the console's uploads.
  const items: Array<{ name: string; base64: string }> = [];
  for (const name of names) items.push({ name, base64: (await readFile(join(folder, name))).toString('base64') });
  const created = await lenstack.batches.create({ items, modules: ['dating', 'describe'] });
  console.log(`batch ${created.id}: ${created.counts.total} photos`);

  // Progress arrives as server-sent events; wait() returns when the batch completes (or pauses).
  const batch = await lenstack.batches.wait(created.id, {
    onProgress: (b) => console.log(`  ${b.counts.done} done, ${b.counts.failed} failed, ${b.counts.pending} pending`),
  });
  if (batch.status === 'paused') console.log(`paused (${batch.pauseReason}): buy credits, then lenstack.batches.resume('${batch.id}')`);

  for await (const item of lenstack.batches.allItems(batch.id)) {
    if (item.status === 'failed') console.log(`  ${item.source}: ${item.error?.code} ${item.error?.message}`);
  }
  await writeFile(out, await lenstack.batches.export(batch.id, format));
  console.log(`${batch.status}, ${batch.creditsCharged} credits; wrote ${out}`);
} catch (err) {
  if (!(err instanceof LenstackError)) throw err;
  console.error(`${err.code} (${err.status ?? 'no answer'}): ${err.message} [request ${err.requestId}]`);
  process.exitCode = 1;
}
