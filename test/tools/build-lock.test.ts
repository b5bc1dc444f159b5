import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { withBuildLock } from '../../tools/scripts/go-tool.ts';

describe('withBuildLock: one tool build per cache at a time', () => {
  const dirs: string[] = [];
  afterEach(async () => {
    for (const dir of dirs.splice(0)) await rm(dir, { recursive: true, force: true });
  });

  it('runs concurrent builders one after another, and the waiting one sees what the first built', async () => {
    const root = await mkdtemp(join(tmpdir(), 'lenstack-build-lock-'));
    dirs.push(root);
    const dir = join(root, 'tool-1.0.0');
    let inside = 0;
    let maxInside = 0;
    let built = false;
    const builds: string[] = [];
    const waits: string[] = [];
    const builder = (name: string) =>
      withBuildLock(
        dir,
        async () => {
          inside += 1;
          maxInside = Math.max(maxInside, inside);
          try {
            if (built) return 'cached';
            // Hold the lock across several event-loop turns, as a real build does.
            for (let i = 0; i < 20; i++) await new Promise((resolve) => setImmediate(resolve));
            built = true;
            builds.push(name);
            return 'built';
          } finally {
            inside -= 1;
          }
        },
        (line) => waits.push(`${name}: ${line}`),
      );
    const results = await Promise.all([builder('a'), builder('b'), builder('c')]);
    expect(maxInside).toBe(1);
    expect(builds).toHaveLength(1);
    expect(results.filter((r) => r === 'built')).toHaveLength(1);
    expect(results.filter((r) => r === 'cached')).toHaveLength(2);
    expect(waits.length).toBeGreaterThanOrEqual(1);
  });

  it('releases the lock when the build fails, so the next caller can build', async () => {
    const root = await mkdtemp(join(tmpdir(), 'lenstack-build-lock-'));
    dirs.push(root);
    const dir = join(root, 'tool-1.0.0');
    await expect(withBuildLock(dir, async () => { throw new Error('go install failed'); })).rejects.toThrow('go install failed');
    await expect(withBuildLock(dir, async () => 'built')).resolves.toBe('built');
  });
});
