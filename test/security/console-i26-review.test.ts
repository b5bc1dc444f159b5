import { randomBytes } from 'node:crypto';
import sharp from 'sharp';
import { describe, expect, it } from 'vitest';
import { consoleSuite, type ConsoleStack } from '../web/console-stack.ts';
import { consoleCall, emailMaker, joinWorkspace, type Person, signUpOverHttp } from '../web/people.ts';

/**
 * Issue 26's review (an attacker's eyes on the reshaped console): each test is an attack through
 * HTTP against the real console server, its real sign-in and the real analyze path.
 */
let stack: ConsoleStack;
consoleSuite((s) => void (stack = s));

const newEmail = emailMaker('i26rev');

async function money(workspaceId: string): Promise<{ balance: number; charged: number; reserves: number }> {
  const b = await stack.pipeline.db.query<{ b: string }>('SELECT community_balance + purchased_balance AS b FROM credit_accounts WHERE user_id = $1', [workspaceId]);
  const l = await stack.pipeline.db.query<{ charged: string; reserves: string }>(
    `SELECT coalesce(sum(charged_delta), 0) AS charged, count(*) FILTER (WHERE kind = 'reserve') AS reserves FROM credit_ledger WHERE user_id = $1`,
    [workspaceId],
  );
  return { balance: Number(b.rows[0]!.b), charged: Number(l.rows[0]!.charged), reserves: Number(l.rows[0]!.reserves) };
}

describe('the Playground spends credits', () => {
  it('refuses a live run to a plain member (batches, keys and purchases are owners’ and admins’), and charges nothing', async () => {
    const owner = await signUpOverHttp(stack, newEmail());
    const member: Person = await signUpOverHttp(stack, newEmail());
    await joinWorkspace(stack, owner, owner.workspaceId, member, 'member');
    // The same member may not start a batch: a batch spends the workspace's credits.
    const batch = await consoleCall(stack, member, 'POST', `/api/v1/workspaces/${owner.workspaceId}/batches`, { uploads: [] });
    expect(batch.status).toBe(403);

    const photo = await sharp(randomBytes(64 * 48 * 3), { raw: { width: 64, height: 48, channels: 3 } }).jpeg().toBuffer();
    const before = await money(owner.workspaceId);
    const res = await consoleCall(stack, member, 'POST', `/api/v1/workspaces/${owner.workspaceId}/playground/analyze`, {
      mode: 'live',
      imageBase64: photo.toString('base64'),
      modules: ['dating', 'location', 'describe'],
    });
    const body = (await res.json()) as { error?: { code: string }; usage?: { creditsCharged: number } };
    // Before a fix: 200 and 3 credits of the owner's workspace spent by a member.
    expect({ status: res.status, code: body.error?.code, charged: body.usage?.creditsCharged }).toEqual({ status: 403, code: 'FORBIDDEN', charged: undefined });
    expect(await money(owner.workspaceId)).toEqual(before);
    // The free test mode stays open to every member.
    const free = await consoleCall(stack, member, 'POST', `/api/v1/workspaces/${owner.workspaceId}/playground/analyze`, { mode: 'test', imageBase64: photo.toString('base64'), modules: ['dating'] });
    expect(free.status).toBe(200);
    // The vehicle stack, which the preview cannot price, is not run by anyone (the owner included).
    const vehicle = await consoleCall(stack, owner, 'POST', `/api/v1/workspaces/${owner.workspaceId}/playground/analyze`, { mode: 'live', imageBase64: photo.toString('base64'), preset: 'vehicle-condition' });
    expect({ status: vehicle.status, code: ((await vehicle.json()) as { error?: { code: string } }).error?.code }).toEqual({ status: 400, code: 'VALIDATION_FAILED' });
    expect(await money(owner.workspaceId)).toEqual(before);
  });
});

describe('signed-out and malformed calls', () => {
  it('answers a signed-out GET of a photo with 401 AUTH_FAILED, as every other console route does', async () => {
    const owner = await signUpOverHttp(stack, newEmail());
    const sha = 'a'.repeat(64);
    // The thumbnails route (same file) answers 401.
    const thumb = await fetch(`${stack.url}/api/v1/workspaces/${owner.workspaceId}/thumbnails/${sha}`);
    expect(thumb.status).toBe(401);
    const res = await fetch(`${stack.url}/api/v1/workspaces/${owner.workspaceId}/photos/${sha}`);
    // Before a fix: 404 NOT_FOUND (the member check's 401 is swallowed into "no such photo").
    expect(res.status).toBe(401);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('AUTH_FAILED');
  });

  it('answers an over-long path parameter with a 4xx in the envelope, never 500 (routes that call zod .parse directly)', async () => {
    const owner = await signUpOverHttp(stack, newEmail());
    const long = 'x'.repeat(101);
    const calls: Array<[string, string]> = [
      ['GET', `/api/v1/workspaces/${long}/batches`],
      ['GET', `/api/v1/workspaces/${long}/keys`],
      ['GET', `/api/v1/workspaces/${long}/members`],
      ['GET', `/api/v1/batch/${long}`],
      ['GET', `/api/v1/workspaces/${owner.workspaceId}/thumbnails/${'a'.repeat(65)}`],
      // (fastify's maxParamLength, 100, turns the 101-character ones above into 404s before zod sees them.)
      ['POST', `/api/v1/batch/bat_nothing/items/abc/retry`],
      ['POST', `/api/v1/batch/bat_nothing/items/100001/retry`],
    ];
    const got: Array<[string, number, string]> = [];
    for (const [method, path] of calls) {
      const res = await consoleCall(stack, owner, method, path);
      const code = res.headers.get('content-type')?.includes('json') ? (((await res.json()) as { error?: { code: string } }).error?.code ?? '') : '';
      got.push([path.replace(long, '<101 chars>'), res.status, code]);
    }
    for (const [path, status, code] of got) {
      expect(status, `${path}: ${code}`).toBeGreaterThanOrEqual(400);
      expect(status, `${path}: ${code}`).toBeLessThan(500);
    }
  });
});

describe('another workspace, and signed-out callers, on the sections issue 26 added', () => {
  it('a stranger gets 404 and a signed-out caller 401 on every workspace route of Requests, Usage, Photos, Playground and Batches', async () => {
    const owner = await signUpOverHttp(stack, newEmail());
    const stranger = await signUpOverHttp(stack, newEmail());
    const w = `/api/v1/workspaces/${owner.workspaceId}`;
    const sha = 'b'.repeat(64);
    const calls: Array<[string, string, unknown?]> = [
      ['GET', `${w}/requests`],
      ['GET', `${w}/requests/1`],
      ['GET', `${w}/usage`],
      ['GET', `${w}/usage.csv`],
      ['GET', `${w}/photos`],
      ['POST', `${w}/photos/lookup`, { imageBase64: 'AAAA' }],
      ['DELETE', `${w}/photos/${sha}`],
      ['GET', `${w}/thumbnails/${sha}`],
      ['GET', `${w}/playground/catalog`],
      ['POST', `${w}/playground/preview`, { sha256: sha, modules: ['dating'] }],
      ['POST', `${w}/playground/analyze`, { mode: 'test', imageBase64: 'AAAA', modules: ['dating'] }],
      ['GET', `${w}/batches`],
      ['GET', `${w}/batches/events`],
    ];
    const got: string[] = [];
    for (const [method, path, body] of calls) {
      const asStranger = await consoleCall(stack, stranger, method, path, body);
      const signedOut = await consoleCall(stack, { cookie: '' }, method, path, body);
      got.push(`${method} ${path.replace(w, '…')}: stranger ${asStranger.status}, signed out ${signedOut.status}`);
    }
    expect(got).toEqual(calls.map(([method, path]) => `${method} ${path.replace(w, '…')}: stranger 404, signed out 401`));
  });
});

describe('large bodies in flight on the console', () => {
  it('a Playground run beyond the process budget is 503 with Retry-After before it is read, and the budget frees once answered', async () => {
    const MiB = 1024 * 1024;
    // One console process with a 2.5 MiB budget: one ~1.5 MB run fits, a second at once does not.
    const small = await stack.replica({ BODY_BYTES_IN_FLIGHT: 2.5 * MiB });
    const owner = await signUpOverHttp(stack, newEmail());
    const photo = await sharp(randomBytes(64 * 48 * 3), { raw: { width: 64, height: 48, channels: 3 } }).jpeg().toBuffer();
    const run = (modules: string[]) =>
      fetch(`${small.url}/api/v1/workspaces/${owner.workspaceId}/playground/analyze`, {
        method: 'POST',
        headers: { cookie: owner.cookie, origin: stack.url, 'content-type': 'application/json' },
        // A real photo, the body padded with JSON white space to ~1.5 MB.
        body: `{"mode":"live","imageBase64":"${photo.toString('base64')}","modules":${JSON.stringify(modules)}${' '.repeat(1.5 * MiB)}}`,
      });
    stack.pipeline.sim.setBehaviour('openai', { latencyMs: 1500 });
    try {
      const before = stack.pipeline.sim.stats().openai.calls;
      const first = run(['dating']);
      // The first run's body is read and its vendor call under way: it holds its share of the budget.
      await expect.poll(() => stack.pipeline.sim.stats().openai.calls, { timeout: 20_000 }).toBeGreaterThan(before);
      const refused = await run(['location']);
      const body = (await refused.json()) as { error?: { code: string; retryable: boolean } };
      expect({ status: refused.status, retryAfter: refused.headers.get('retry-after'), code: body.error?.code }).toEqual({ status: 503, retryAfter: '2', code: 'SERVICE_UNAVAILABLE' });
      expect((await first).status).toBe(200);
      const again = await run(['location']);
      expect(again.status).toBe(200);
    } finally {
      stack.pipeline.sim.reset();
    }
  }, 90_000);
});
