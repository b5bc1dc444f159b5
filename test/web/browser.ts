import { createRequire } from 'node:module';
import { existsSync, readFileSync } from 'node:fs';
import { chromium, type Browser, type Page } from 'playwright-core';

/** Debian's Chromium (`.ci/run` installs the package); playwright-core never downloads a browser. */
export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

export async function launchChromium(): Promise<Browser> {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: install Debian's chromium package (apt-get install chromium), as .ci/run does`);
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    // This machine has no network beyond loopback: Chromium's own background traffic only fails.
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage'],
  });
}

const AXE = createRequire(import.meta.url).resolve('axe-core/axe.min.js');

/** axe-core's serious and critical findings on the page as it is now (WCAG 2.x A/AA rules). */
export async function seriousA11yViolations(page: Page): Promise<Array<{ id: string; impact: string; help: string; nodes: string[] }>> {
  // Evaluated through the DevTools protocol, not as a <script> tag: the console's
  // Content-Security-Policy refuses inline scripts, as it should.
  await page.evaluate(readFileSync(AXE, 'utf8'));
  // Runs in the page (DOM types are not in this project's lib): globalThis there is the window.
  type AxeResult = { violations: Array<{ id: string; impact: string; help: string; nodes: Array<{ target: string[] }> }> };
  const result = await page.evaluate(async () => {
    const g = globalThis as unknown as { axe: { run(ctx: unknown, opts: unknown): Promise<AxeResult> }; document: unknown };
    return g.axe.run(g.document, { runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'] } });
  });
  return result.violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map((n) => n.target.join(' ')) }));
}

/** LENSTACK_SCREENSHOTS=1 writes docs/screenshots/<name>-{desktop,phone}.png (as test/web/console.test.ts does). */
export async function screenshot(page: Page, name: string): Promise<void> {
  if (!process.env.LENSTACK_SCREENSHOTS) return;
  const dir = new URL('../../docs/screenshots/', import.meta.url).pathname;
  const viewport = page.viewportSize()!;
  await page.screenshot({ path: `${dir}${name}-desktop.png`, fullPage: true });
  await page.setViewportSize({ width: 390, height: 844 });
  await page.screenshot({ path: `${dir}${name}-phone.png`, fullPage: true });
  await page.setViewportSize(viewport);
}
