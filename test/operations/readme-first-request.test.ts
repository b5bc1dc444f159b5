import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { readFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getBalance } from '../../credits/ledger.ts';
import { createTestAccount } from '../helpers/app.ts';
import { startPipeline, type Pipeline } from '../helpers/pipeline.ts';

// README.md's "Your first request" block, run with bash and curl exactly as written (only the
// key's placeholder line dropped and the port changed) against the real API on a real socket,
// with the real worker and the vendor simulator: the README cannot drift from what works.

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const README = readFileSync(`${ROOT}README.md`, 'utf8');
const ANONYMOUS_SANDBOX_KEY = 'svc_test_public0000000000000000000000000000000000';

function fencedBlockAfter(marker: string, lang: string): string {
  const at = README.indexOf(marker);
  expect(at, `README.md has "${marker}"`).toBeGreaterThan(-1);
  const open = README.indexOf('```' + lang + '\n', at);
  const close = README.indexOf('\n```', open + 4);
  return README.slice(open + lang.length + 4, close);
}

const block = fencedBlockAfter('<!-- first-request:', 'sh');
const answerShape = fencedBlockAfter('It answers (shortened):', 'json');

let p: Pipeline;
let port: number;
beforeAll(async () => {
  p = await startPipeline();
  await p.app.listen({ host: '127.0.0.1', port: 0 });
  port = (p.app.server.address() as AddressInfo).port;
}, 120_000);
afterAll(async () => {
  await p?.close();
});

const run = promisify(execFile);

/**
 * The README's commands with the key in the environment, on this test's port. Asynchronous: the
 * API answering them runs in this process.
 */
async function runFirstRequest(key: string): Promise<Record<string, unknown>> {
  const [keyLine, ...rest] = block.split('\n');
  expect(keyLine).toBe('KEY=svc_live_…');
  const script = rest.join('\n');
  expect(script).toContain('localhost:8080');
  // execFile rejects on a non-zero exit, with the output in the error.
  // The user's own shell set-up (BASH_ENV, rc files) stays out of it: the block is what is run.
  const r = await run('bash', ['--norc', '--noprofile', '-euo', 'pipefail', '-c', script.replaceAll('localhost:8080', `127.0.0.1:${port}`)], {
    cwd: ROOT,
    env: { ...process.env, BASH_ENV: '', ENV: '', KEY: key },
    maxBuffer: 16 * 1024 * 1024,
  });
  expect(r.stderr).toBe('');
  return JSON.parse(r.stdout) as Record<string, unknown>;
}

describe('the README’s first request', () => {
  it('sends the bundled photo with a live key and gets a full analysis, billed once', async () => {
    const user = await createTestAccount(p.db, { purchased: 1000 });
    const before = await getBalance(p.db, user.userId);
    const first = (await runFirstRequest(user.liveKey) as {
      object: string;
      output: Record<string, unknown>;
      usage: { creditsCharged: number; modulesUsed: string[] };
      warnings: string[];
      meta: { cacheHit: boolean; provider: string };
    });
    expect(first.object).toBe('analysis');
    expect(first.usage.modulesUsed).toEqual(expect.arrayContaining(['moderation', 'dating', 'location', 'describe']));
    expect(first.output).toHaveProperty('locationEstimate');
    expect(first.meta).toMatchObject({ cacheHit: false, provider: 'openai (simulated)' });
    expect(first.warnings).toContain('simulated: answered by the Lenstack vendor simulator, not a real AI model (no vendor API key configured)');
    const after = await getBalance(p.db, user.userId);
    expect(first.usage.creditsCharged).toBeGreaterThan(0);
    expect(before.purchased - after.purchased).toBe(first.usage.creditsCharged);

    // The README's shortened answer names the fields the real one has, and no others at the top.
    expect(Object.keys(first).sort()).toEqual(['createdAt', 'id', 'meta', 'object', 'output', 'outputSchema', 'schemaVersion', 'usage', 'warnings']);
    for (const key of Object.keys(first)) expect(answerShape).toContain(`"${key}":`);
    expect(answerShape).toContain(`"creditsCharged":${first.usage.creditsCharged}`);

    // "Send the same photo again and it costs nothing."
    const again = (await runFirstRequest(user.liveKey)) as { usage: { creditsCharged: number }; meta: { cacheHit: boolean } };
    expect(again.usage.creditsCharged).toBe(0);
    expect(again.meta.cacheHit).toBe(true);
    expect((await getBalance(p.db, user.userId)).purchased).toBe(after.purchased);
  });

  it('works with the anonymous sandbox key the README names, answering its fixed payload', async () => {
    expect(README).toContain(ANONYMOUS_SANDBOX_KEY);
    const answer = (await runFirstRequest(ANONYMOUS_SANDBOX_KEY)) as { id: string; object: string; usage: { creditsCharged: number } };
    expect(answer.id).toBe('ana_sandbox_anonymous');
    expect(answer.object).toBe('analysis');
    expect(answer.usage.creditsCharged).toBe(0);
  });
});
