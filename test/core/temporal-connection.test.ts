import { once } from 'node:events';
import { createConnection, createServer, type AddressInfo, type Socket } from 'node:net';
import { afterEach, describe, expect, inject, it } from 'vitest';
import { connectTemporal } from '../../core/temporal-connection.ts';

/**
 * Found by CI: the API closed its Temporal connection at shutdown while a caller's result
 * long-poll was between retries of an outage, and the SDK's retry timer then threw "Channel has
 * been shut down" from a timer (an uncaught exception) and never settled the call. Temporal is
 * reached here through a TCP relay the test cuts, so the call is retrying when the connection closes.
 */
let uncaught: unknown[] = [];
const onUncaught = (err: unknown) => uncaught.push(err);
afterEach(() => {
  process.off('uncaughtException', onUncaught);
  uncaught = [];
});

async function relayTo(address: string) {
  const [host, port] = address.split(':');
  const sockets = new Set<Socket>();
  let cut = false;
  let refused = 0;
  const server = createServer((client) => {
    client.on('error', () => {});
    if (cut) {
      refused++;
      client.destroy();
      return;
    }
    const upstream = createConnection({ host, port: Number(port) });
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('error', () => {});
      s.on('close', () => sockets.delete(s));
    }
    client.pipe(upstream).pipe(client);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    address: `127.0.0.1:${(server.address() as AddressInfo).port}`,
    /** Drop every open connection and refuse new ones: Temporal is unreachable from now on. */
    cut() {
      cut = true;
      for (const s of sockets) s.destroy();
    },
    refused: () => refused,
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}

describe('closing the Temporal connection during an outage', () => {
  it('settles a call that is retrying instead of leaving it pending, and no retry reaches the closed channel', async () => {
    process.on('uncaughtException', onUncaught);
    const relay = await relayTo(inject('temporalAddress'));
    const connection = await connectTemporal(relay.address);
    await connection.workflowService.getSystemInfo({});
    relay.cut();

    const call = connection.workflowService.getSystemInfo({}).then(
      () => ({ code: 0 }),
      (err: { code?: number }) => err,
    );
    // Its first try has met the outage; the SDK now waits and tries again.
    await expect.poll(() => relay.refused(), { timeout: 10_000, interval: 5 }).toBeGreaterThanOrEqual(1);
    await connection.close();
    // Before, this call stayed pending for ever and its next try threw from the SDK's timer.
    expect((await call).code).toBeOneOf([1 /* CANCELLED */, 14 /* UNAVAILABLE: the try under way when closing began */]);
    expect(await connection.workflowService.getSystemInfo({}).catch((err: { code?: number }) => err)).toMatchObject({ code: 1 });
    expect(uncaught).toEqual([]);
    await relay.close();
  }, 30_000);
});
