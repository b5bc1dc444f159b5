import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Connection } from '@temporalio/client';
import { afterAll, describe, expect, test } from 'vitest';
import { readFileSync } from 'node:fs';
import { connectIfTemporal, LOW_LATENCY_DYNAMIC_CONFIG, startTemporalDevServer } from '../../tools/scripts/temporal.ts';
import { SEARCH_ATTRIBUTES } from '../../workflows/search-attributes.ts';

const tmp = await mkdtemp(join(tmpdir(), 'lenstack-temporal-test-'));
afterAll(() => rm(tmp, { recursive: true, force: true }));

function portRefuses(address: string): Promise<boolean> {
  const [host, port] = address.split(':');
  return new Promise((resolve) => {
    const socket = connect({ host: host!, port: Number(port) });
    socket.once('connect', () => (socket.destroy(), resolve(false)));
    socket.once('error', () => resolve(true));
  });
}

async function until(what: string, check: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('startTemporalDevServer', () => {
  test('a SQLite-backed server restarts on its file with search attributes intact and stops cleanly', async () => {
    const dbFile = join(tmp, 'state', 'temporal.sqlite');
    const first = await startTemporalDevServer({ dbFile, logFile: join(tmp, 'temporal.log') });
    expect(first.uiUrl).toBeNull();
    await first.stop();
    expect(await portRefuses(first.address)).toBe(true);

    // The second start finds the attributes already in the file: the flags must not make it fail.
    const second = await startTemporalDevServer({ dbFile, namespace: 'lenstack-tooling' });
    try {
      const connection = await connectIfTemporal(second.address, 'lenstack-tooling', 5_000);
      const { customAttributes } = await connection.operatorService.listSearchAttributes({ namespace: 'default' });
      for (const key of Object.values(SEARCH_ATTRIBUTES)) expect(customAttributes).toHaveProperty(key.name);
      // One partition per task queue (the low-latency settings): 4 is the server's default.
      const partitions = await connection.workflowService.listTaskQueuePartitions({
        namespace: 'lenstack-tooling',
        taskQueue: { name: 'any-queue' },
      });
      expect(partitions.workflowTaskQueuePartitions).toHaveLength(1);
      expect(partitions.activityTaskQueuePartitions).toHaveLength(1);
      await connection.close();
    } finally {
      await second.stop();
    }
    expect(await second.exited).toBe(0);
  });

  test('docker-compose.yml runs its Temporal with the same low-latency settings as the dev server here', () => {
    const compose = readFileSync(new URL('../../docker-compose.yml', import.meta.url), 'utf8');
    for (const [key, value] of Object.entries(LOW_LATENCY_DYNAMIC_CONFIG)) {
      expect(compose).toContain(`--dynamic-config-value=${key}=${JSON.stringify(value)}`);
    }
  });

  test('the server dies with its owner even when the owner is SIGKILLed', async () => {
    const owner = spawn(
      process.execPath,
      ['--import', 'tsx', '--input-type=module', '-e', OWNER_SCRIPT],
      { cwd: new URL('../..', import.meta.url), stdio: ['ignore', 'pipe', 'inherit'] },
    );
    const address = await new Promise<string>((resolve, reject) => {
      let out = '';
      owner.stdout.on('data', (c: Buffer) => {
        out += c.toString();
        const match = /ADDRESS (\S+)/.exec(out);
        if (match) resolve(match[1]!);
      });
      owner.once('exit', (code) => reject(new Error(`owner exited early (${code}): ${out}`)));
    });
    const connection = await Connection.connect({ address });
    await connection.close();

    owner.kill('SIGKILL');
    await until(`the orphaned server at ${address} to go away`, () => portRefuses(address), 20_000);
  });
});

const OWNER_SCRIPT = `
import { startTemporalDevServer } from './tools/scripts/temporal.ts';
const server = await startTemporalDevServer({});
console.log('ADDRESS ' + server.address);
setInterval(() => {}, 1000);
`;
