import { readFileSync } from 'node:fs';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { UI_DIST } from '../../web/server.ts';

/**
 * The console's first load stays light: the JavaScript and CSS that index.html pulls in, gzipped
 * as a server would send them, within the budget (docs/decisions.md "Console: JS budget").
 * The test setup builds web/ui/dist from the sources first.
 */
export const FIRST_LOAD_JS_BUDGET_GZIP = 80 * 1024;

describe('console first-load budget', () => {
  it(`loads at most ${FIRST_LOAD_JS_BUDGET_GZIP / 1024} KiB of gzipped JavaScript, and every asset index.html names exists`, () => {
    const html = readFileSync(path.join(UI_DIST, 'index.html'), 'utf8');
    const assets = [...html.matchAll(/(?:src|href)="\/(assets\/[^"]+)"/g)].map((m) => m[1]!);
    const js = assets.filter((a) => a.endsWith('.js'));
    expect(js.length).toBeGreaterThan(0);
    expect(assets.some((a) => a.endsWith('.css'))).toBe(true);
    const gz = js.reduce((sum, a) => sum + gzipSync(readFileSync(path.join(UI_DIST, a))).length, 0);
    expect(gz).toBeLessThanOrEqual(FIRST_LOAD_JS_BUDGET_GZIP);
  });
});
