import net from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { FaultProxy } from '../../tools/chaos/fault-proxy.ts';
import { rngFor } from '../../samples/random.ts';

/** The chaos suite's TCP fault proxy against a loopback echo server. */
let echo: net.Server;
let echoPort: number;
let proxy: FaultProxy;
const clients: net.Socket[] = [];

beforeAll(async () => {
  echo = net.createServer((s) => {
    s.on('error', () => {});
    s.pipe(s);
  });
  await new Promise<void>((r) => echo.listen(0, '127.0.0.1', () => r()));
  echoPort = (echo.address() as net.AddressInfo).port;
});
afterAll(async () => {
  await new Promise<void>((r) => echo.close(() => r()));
});
afterEach(async () => {
  for (const c of clients.splice(0)) c.destroy();
  await proxy?.close();
});

const NONE = { resetPerSecond: 0, stallPerSecond: 0, stallMs: [0, 0] as [number, number], acceptResetRate: 0 };

function connect(): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const c = net.connect({ host: '127.0.0.1', port: proxy.port }, () => resolve(c));
    c.once('error', reject);
    clients.push(c);
  });
}

/** Send `text` and resolve with the echo, or reject with the socket's error / end. */
function roundTrip(c: net.Socket, text: string): Promise<string> {
  return new Promise((resolve, reject) => {
    let got = '';
    c.on('data', (d) => {
      got += d;
      if (got.length >= text.length) resolve(got);
    });
    c.once('error', reject);
    c.once('close', () => reject(new Error(`closed after ${JSON.stringify(got)}`)));
    c.write(text);
  });
}

describe('FaultProxy', () => {
  it('forwards both ways when no faults are set, and rewrites URLs to itself', async () => {
    proxy = await FaultProxy.start({ name: 'echo', target: { host: '127.0.0.1', port: echoPort }, rng: rngFor('t') });
    expect(await roundTrip(await connect(), 'hello through the proxy')).toBe('hello through the proxy');
    expect(proxy.proxiedUrl('postgres://u:p@db.example:5432/lenstack?x=1')).toBe(`postgres://u:p@127.0.0.1:${proxy.port}/lenstack?x=1`);
    expect(proxy.stats()).toMatchObject({ accepted: 1, open: 1, resets: 0, acceptResets: 0, stalls: 0 });
  });

  it('resets an open connection: the client sees ECONNRESET', async () => {
    proxy = await FaultProxy.start({ name: 'echo', target: { host: '127.0.0.1', port: echoPort }, rng: rngFor('t') });
    const c = await connect();
    expect(await roundTrip(c, 'before')).toBe('before');
    const failed = new Promise<NodeJS.ErrnoException>((resolve) => c.once('error', resolve));
    proxy.setFaults({ ...NONE, resetPerSecond: 1_000 });
    expect((await failed).code).toBe('ECONNRESET');
    expect(proxy.stats()).toMatchObject({ resets: 1, open: 0 });
  });

  it('resets new connections at accept', async () => {
    proxy = await FaultProxy.start({ name: 'echo', target: { host: '127.0.0.1', port: echoPort }, rng: rngFor('t') });
    proxy.setFaults({ ...NONE, acceptResetRate: 1 });
    // The RST may beat the client's own 'connect' event.
    const outcome = await connect().then((c) => roundTrip(c, 'x')).catch((err: NodeJS.ErrnoException) => err);
    expect(outcome).toMatchObject({ code: 'ECONNRESET' });
    expect(proxy.stats().acceptResets).toBe(1);
  });

  it('stalls a connection for the drawn time, then carries on', async () => {
    proxy = await FaultProxy.start({ name: 'echo', target: { host: '127.0.0.1', port: echoPort }, rng: rngFor('t') });
    const c = await connect();
    expect(await roundTrip(c, 'warm')).toBe('warm');
    proxy.setFaults({ ...NONE, stallPerSecond: 1_000, stallMs: [400, 400] });
    await expect.poll(() => proxy.stats().stalls).toBe(1);
    proxy.setFaults(null);
    const t0 = performance.now();
    expect(await roundTrip(c, 'after the stall')).toBe('after the stall');
    expect(performance.now() - t0).toBeGreaterThanOrEqual(250);
    expect(proxy.stats()).toMatchObject({ resets: 0, open: 1 });
  });
});
