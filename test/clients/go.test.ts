import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getBalance } from '../../credits/ledger.ts';
import { VEHICLE_REPORT_CREDITS } from '../../credits/price-book.ts';
import { GO_CLIENT_DIR, goClientCurrent } from '../../tools/scripts/go-client.ts';
import { createTestAccount } from '../helpers/app.ts';
import { PHOTOS_DIR } from '../helpers/photos.ts';
import { startPipeline, type Pipeline } from '../helpers/pipeline.ts';

/**
 * The Go module (clients/go) as a Go developer gets it: oapi-codegen's client made from the
 * committed document, plus the hand-written idioms, tested with Go's own tooling. Its stack test
 * runs against this API (a real worker, the simulated vendors) over HTTP.
 */
const run = promisify(execFile);
let p: Pipeline;
let baseUrl: string;
beforeAll(async () => {
  p = await startPipeline();
  baseUrl = await p.app.listen({ port: 0, host: '127.0.0.1' });
}, 120_000);
afterAll(() => p?.close());

describe('the Go client', () => {
  it('is what oapi-codegen v2.8.2 makes of openapi/lenstack.json (run `npm run client:go` when this fails)', async () => {
    expect(await goClientCurrent()).toBe(true);
  }, 900_000);

  it('builds, passes its own tests, and runs analyze → lookup → photo and vehicle batches → items → export against the API', async () => {
    const user = await createTestAccount(p.db, { community: 100 });
    const env = { ...process.env, LENSTACK_BASE_URL: baseUrl, LENSTACK_API_KEY: user.liveKey, LENSTACK_PHOTOS: PHOTOS_DIR, GOFLAGS: '-mod=readonly' };
    const { stdout } = await run('go', ['test', '-tags', 'stack', '-count=1', '-v', './...'], { cwd: GO_CLIENT_DIR, env, maxBuffer: 16 * 1024 * 1024 });
    for (const name of ['TestRetriesWithTheSameRequestID', 'TestAPIErrorCarriesTheEnvelope', 'TestNewRefusesNoKey', 'TestAgainstTheStack']) {
      expect(stdout).toContain(`--- PASS: ${name}`);
    }
    expect(stdout).not.toContain('--- FAIL');
    // What it ran was billed once each: two lenses on one photo, one lens on two photos, one vehicle report.
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 100 - 2 - 2 - VEHICLE_REPORT_CREDITS, reserved: 0 });
  }, 900_000);
});
