/**
 * Run by test/clients/cli-memory.test.ts as its own process (`node --expose-gc --import tsx
 * test/helpers/cli-fleet-memory.ts <vehicles> <photos>`): `lenstack batch --vehicles` (the CLI's
 * main, in this process) on a folder of tiny photos, against a stub API at the wire in this
 * process too. The stub takes every upload (tus creation-with-upload under the CLI's id), submits
 * the batch as running, and holds the batch's event stream open until the last upload arrived;
 * then it collects garbage and reads the heap's data (objects, strings, arrays: not compiled code)
 * and the ArrayBuffers alive, while the CLI still holds everything it keeps for the run (its plan,
 * its state, the uploads' outcome), and only then tells the CLI the batch completed. The stub
 * keeps counters only, nothing per photo, so what grows with the photos is the CLI's. Also counts
 * the bytes of every Buffer.allocUnsafeSlow of the run (what file reads allocate). Prints one JSON
 * line: { heapData, arrayBuffers, slowBufferBytes, measured, code, uploads }.
 */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { getHeapSpaceStatistics } from 'node:v8';
import { main } from '../../clients/cli/src/main.ts';

// Every buffer file reads allocate (fs read streams and the CLI's own reads), counted: a buffer per
// chunk read is garbage in proportion to the bytes sent, which the heap after a collection never shows.
let slowBufferBytes = 0;
const allocUnsafeSlow = Buffer.allocUnsafeSlow;
Buffer.allocUnsafeSlow = (size: number) => {
  slowBufferBytes += size;
  return allocUnsafeSlow(size);
};
const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error('run with --expose-gc');
const [vehicles, photos] = process.argv.slice(2).map(Number) as [number, number];
const total = vehicles * photos;

const dir = await mkdtemp(join(tmpdir(), 'lenstack-cli-memory-'));
for (let v = 0; v < vehicles; v++) {
  const folder = join(dir, `vehicle-${String(v).padStart(4, '0')}`);
  await mkdir(folder);
  for (let p = 0; p < photos; p++) await writeFile(join(folder, `IMG_${String(p).padStart(4, '0')}.jpg`), `photo ${v}-${p} of a fleet, some bytes to hash and send`);
}

const batch = (status: string, done: number) => ({
  object: 'batch', id: 'bat_memory', kind: 'vehicles', status, pauseReason: null, creditsCharged: done, etaSeconds: null,
  counts: { total: vehicles, done, failed: 0, pending: vehicles - done },
});
let uploads = 0;
const measured = { done: false, heapData: 0, arrayBuffers: 0 };
const DATA_SPACES = new Set(['new_space', 'old_space', 'large_object_space', 'new_large_object_space']);
let events: ServerResponse | null = null;
const finish = () => {
  if (uploads < total || !events || measured.done) return;
  gc();
  gc();
  // The heap's data: objects, strings and arrays, not the compiled code (a longer run optimizes more functions).
  const data = getHeapSpaceStatistics().filter((s) => DATA_SPACES.has(s.space_name)).reduce((n, s) => n + s.space_used_size, 0);
  Object.assign(measured, { done: true, heapData: data, arrayBuffers: process.memoryUsage().arrayBuffers });
  events.end(`event: batch\ndata: ${JSON.stringify(batch('completed', vehicles))}\n\n`);
};
const json = (res: ServerResponse, status: number, body: unknown) => {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
};
const server = createServer((req, res) => {
  const url = req.url!;
  if (url.startsWith('/v1/uploads')) {
    // Creation-with-upload: the id the CLI chose is in Upload-Metadata (uploadId, base64).
    const meta = String(req.headers['upload-metadata'] ?? '');
    const id = Buffer.from(/(?:^|,)uploadId ([^,]+)/.exec(meta)?.[1] ?? '', 'base64').toString();
    let n = 0;
    req.on('data', (c: Buffer) => (n += c.length));
    req.on('end', () => {
      uploads++;
      // Once the answer is out (the CLI records the upload as it reads it).
      res.on('finish', () => setImmediate(finish));
      res.writeHead(201, { 'tus-resumable': '1.0.0', location: `/v1/uploads/${id}`, 'upload-offset': String(n) });
      res.end();
    });
    return;
  }
  req.resume();
  if (req.method === 'POST' && url === '/v1/batches') return json(res, 202, batch('running', 0));
  if (url === '/v1/batches/bat_memory/events') {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write(`event: batch\ndata: ${JSON.stringify(batch('running', 0))}\n\n`);
    events = res;
    return finish();
  }
  if (url.startsWith('/v1/batches/bat_memory/items')) return json(res, 200, { object: 'list', items: [], nextAfter: null });
  if (url === '/v1/batches/bat_memory') return json(res, 200, batch('completed', vehicles));
  json(res, 404, { error: { code: 'NOT_FOUND', message: `${req.method} ${url}` } });
});
await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));

const sink = { isTTY: false, write: () => true } as unknown as NodeJS.WriteStream;
const code = await main(['batch', '--vehicles', dir, '--json'], { apiKey: 'svc_live_memory', baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}` }, { stdout: sink, stderr: sink });
server.closeAllConnections();
server.close();
await rm(dir, { recursive: true, force: true });
console.log(JSON.stringify({ heapData: measured.heapData, arrayBuffers: measured.arrayBuffers, slowBufferBytes, measured: measured.done, code, uploads }));
