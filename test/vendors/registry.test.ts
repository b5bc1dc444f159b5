import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { configSchema, loadConfig, vendorName } from '../../core/config.ts';
import { REDACT_PATHS } from '../../core/logger.ts';
import { VENDOR_ACTIVITY, VENDOR_ENV_PREFIX, VENDOR_NAMES } from '../../core/vendor-names.ts';
import { vendorActivities } from '../../activities/vendors.ts';
import type { ActivityDeps } from '../../activities/deps.ts';
import { analysisSchema } from '../../analysis/contract.ts';
import { VENDORS as SIM_VENDORS } from '../../tools/sim/app.ts';
import { SIM_PROTOCOLS } from '../../tools/sim/protocols/index.ts';
import { VENDOR_PLUGINS, VENDOR_REGISTRY, vendorSettings } from '../../vendors/index.ts';

/**
 * The registry is the only list of vendors (docs/architecture.md, "Adding a vendor"): every list the
 * product keeps of them equals the registry's names, so a vendor added to the registry appears
 * everywhere, and a vendor spelled anywhere else without it fails here.
 */
const names = [...VENDOR_NAMES].sort();

/** The TypeScript files under the repository's root, but for the folders in `skip`. */
function tsFiles(skip: ReadonlySet<string>): string[] {
  const files: string[] = [];
  const walk = (dir: string) => {
    for (const d of readdirSync(dir, { withFileTypes: true })) {
      const p = dir === '.' ? d.name : path.join(dir, d.name);
      if (d.isDirectory()) {
        if (!d.name.startsWith('.') && !skip.has(p)) walk(p);
      } else if (/\.tsx?$/.test(d.name)) files.push(p);
    }
  };
  walk('.');
  return files;
}

describe('the vendor registry is the one list of vendors', () => {
  it('registers one plug-in per name, under its own name', () => {
    expect(Object.keys(VENDOR_REGISTRY).sort()).toEqual(names);
    expect(VENDOR_PLUGINS.map((p) => p.name)).toEqual([...VENDOR_NAMES]);
    for (const p of VENDOR_PLUGINS) expect(VENDOR_REGISTRY[p.name]).toBe(p);
    expect(names).toEqual(['anthropic', 'google', 'openai']);
  });

  it("config's vendor enum and VENDOR_ORDER's default are the registry's names", () => {
    expect([...vendorName.options].sort()).toEqual(names);
    expect(loadConfig({}).VENDOR_ORDER).toEqual([...VENDOR_NAMES]);
    expect(() => loadConfig({ VENDOR_ORDER: 'openai,mistral' })).toThrow();
  });

  it("config's per-vendor variables are exactly the registry's prefixes, each with its five variables", () => {
    const keys = Object.keys(configSchema.shape);
    const keyPrefixes = keys.flatMap((k) => /^([A-Z]+)_API_KEY$/.exec(k)?.[1] ?? []).sort();
    expect(keyPrefixes).toEqual(VENDOR_NAMES.map((v) => VENDOR_ENV_PREFIX[v]).sort());
    for (const v of VENDOR_NAMES) {
      for (const suffix of ['API_KEY', 'BASE_URL', 'MODEL', 'RPM', 'TPM']) expect(keys).toContain(`${VENDOR_ENV_PREFIX[v]}_${suffix}`);
    }
    // config.ts derives them from the prefixes: it spells none (comments aside).
    expect(readFileSync('core/config.ts', 'utf8')).not.toMatch(/^\s*(OPENAI|ANTHROPIC|GEMINI)_\w+:|['"`](OPENAI|ANTHROPIC|GEMINI)_/m);
    // The same variables, in the same order, as when config.ts spelled them out.
    expect(keys.filter((k) => /^(OPENAI|ANTHROPIC|GEMINI)_/.test(k))).toEqual([
      'OPENAI_BASE_URL', 'OPENAI_API_KEY', 'OPENAI_MODEL',
      'ANTHROPIC_BASE_URL', 'ANTHROPIC_API_KEY', 'ANTHROPIC_MODEL',
      'GEMINI_BASE_URL', 'GEMINI_API_KEY', 'GEMINI_MODEL',
      'OPENAI_RPM', 'OPENAI_TPM', 'ANTHROPIC_RPM', 'ANTHROPIC_TPM', 'GEMINI_RPM', 'GEMINI_TPM',
    ]);
    const defaults = loadConfig({});
    expect([defaults.OPENAI_MODEL, defaults.ANTHROPIC_MODEL, defaults.GEMINI_MODEL]).toEqual(['gpt-4.1-mini', 'claude-sonnet-4-6', 'gemini-2.5-flash']);
    expect([defaults.OPENAI_API_KEY, defaults.GEMINI_BASE_URL, defaults.ANTHROPIC_RPM, defaults.GEMINI_TPM]).toEqual([undefined, undefined, 0, 0]);
    expect(() => loadConfig({ ANTHROPIC_BASE_URL: 'not a url' })).toThrow(/ANTHROPIC_BASE_URL/);
    expect(() => loadConfig({ OPENAI_RPM: '-1' })).toThrow(/OPENAI_RPM/);
    // A vendor key switches SIM_VENDOR_URL_IF_NO_KEYS off, whichever vendor's it is.
    for (const key of ['OPENAI_API_KEY', 'ANTHROPIC_API_KEY', 'GEMINI_API_KEY']) {
      expect(loadConfig({ SIM_VENDOR_URL_IF_NO_KEYS: 'http://sim.test', [key]: 'k' }).SIM_VENDOR_URL).toBeUndefined();
    }
    expect(loadConfig({ SIM_VENDOR_URL_IF_NO_KEYS: 'http://sim.test' }).SIM_VENDOR_URL).toBe('http://sim.test');
    expect(() => loadConfig({ SIM_VENDOR_URL: 'http://sim.test', STRIPE_SECRET_KEY: 'sk_live_x', STRIPE_WEBHOOK_SECRET: 'w' })).toThrow(
      'Set the vendor API keys (OPENAI_API_KEY, ANTHROPIC_API_KEY, GEMINI_API_KEY) and leave SIM_VENDOR_URL unset',
    );
    const s = vendorSettings(loadConfig({ GEMINI_API_KEY: 'g-key', GEMINI_MODEL: 'gemini-x', GEMINI_RPM: '7', OPENAI_TPM: '9' }), 'google');
    expect(s).toEqual({ apiKey: 'g-key', baseURL: undefined, model: 'gemini-x', rpm: 7, tpm: 0 });
  });

  it("log redaction hides every registered vendor's key and names no other", () => {
    const vendorKeyPaths = REDACT_PATHS.filter((p) => /^config\.[A-Z]+_API_KEY$/.test(p)).sort();
    expect(vendorKeyPaths).toEqual(VENDOR_NAMES.map((v) => `config.${VENDOR_ENV_PREFIX[v]}_API_KEY`).sort());
  });

  it('the worker has one activity per vendor, named as the workflow calls it', () => {
    const activities = vendorActivities({} as ActivityDeps);
    expect(Object.keys(activities).sort()).toEqual(VENDOR_NAMES.map((v) => VENDOR_ACTIVITY[v]).sort());
    expect(new Set(Object.values(VENDOR_ACTIVITY)).size).toBe(VENDOR_NAMES.length);
    // The recorded histories name these: an existing vendor's activity keeps its name.
    expect(VENDOR_ACTIVITY).toEqual({ openai: 'callOpenAI', anthropic: 'callAnthropic', google: 'callGoogle' });
  });

  it("the API contract's vendor enum, the OpenAPI document's and the simulator's list are the registry's names", () => {
    const vendor = analysisSchema.shape.meta.shape.vendor;
    expect([...vendor.options].sort()).toEqual(names);
    const doc = JSON.parse(readFileSync('openapi/lenstack.json', 'utf8'));
    expect([...doc.components.schemas.Analysis.properties.meta.properties.vendor.enum].sort()).toEqual(names);
    expect([...SIM_VENDORS].sort()).toEqual(names);
    expect(Object.keys(SIM_PROTOCOLS).sort()).toEqual(names);
    for (const v of VENDOR_NAMES) expect(SIM_PROTOCOLS[v].vendor).toBe(v);
  });

  it('no product module outside the vendor code spells a vendor name', () => {
    // A vendor's own code is its folder, vendors/<vendor>/; its name, prefix and activity are in
    // core/vendor-names.ts. Nothing else (vendors/resize.ts, vendors/schema-dialect.ts, the registry) quotes one.
    const vendorCode = (f: string) => f === 'core/vendor-names.ts' || VENDOR_NAMES.some((v) => f.startsWith(`vendors/${v}/`));
    // tools/sim is the simulator, checked below. The console's `google` is a sign-in provider,
    // quoted as such in web/ (not a vendor).
    const files = tsFiles(new Set(['node_modules', 'test', 'bench', 'docs', 'openapi', 'clients', 'tools/sim', 'web', 'deploy', 'samples', 'examples']));
    expect(files).toContain('workflows/steps.ts');
    expect(files).toContain('vendors/resize.ts');
    // core/vendor-names.ts, and each vendor's index.ts and simulator.ts.
    expect(files.filter(vendorCode).length).toBe(1 + 2 * VENDOR_NAMES.length);
    // Quoted, or as an object's key.
    const spelled = files.filter((f) => !vendorCode(f) && /(['"])(openai|anthropic|google)\1|^\s*(openai|anthropic|google)\??:/m.test(readFileSync(f, 'utf8')));
    expect(spelled).toEqual([]);
  });

  it("a vendor's folder is its plug-in and its simulated vendor, and the simulator's own modules quote no vendor name", () => {
    // vendors/<vendor>/: index.ts (plug-in and adapter), simulator.ts (the simulated vendor), nothing else.
    for (const v of VENDOR_NAMES) expect(readdirSync(`vendors/${v}`).sort()).toEqual(['index.ts', 'simulator.ts']);
    const files = [...readdirSync('tools/sim').map((f) => `tools/sim/${f}`), ...readdirSync('tools/sim/protocols').map((f) => `tools/sim/protocols/${f}`)].filter((f) => f.endsWith('.ts'));
    // The simulator's shared part (protocols/common.ts) and the registry loading each vendor's
    // simulator.ts by name (protocols/index.ts).
    expect(files).toContain('tools/sim/app.ts');
    expect(files).toContain('tools/sim/protocols/index.ts');
    // Quoted, or as an object's key.
    const spelled = files.filter((f) => /(['"])(openai|anthropic|google)\1|^\s*(openai|anthropic|google)\??:/m.test(readFileSync(f, 'utf8')));
    expect(spelled).toEqual([]);
  });

  it('no product module names a simulated vendor: only the simulator (tools/sim/protocols/index.ts) loads one', () => {
    // Static imports are the layer check's (product-not-simulator, .dependency-cruiser.cjs); this
    // reads every product module for an import() of a simulator.ts, which that check cannot follow.
    const importsSimulator = (text: string) => /(\bfrom\s*|\bimport\s*\(\s*)['"`][^'"`]*simulator\.ts['"`]/.test(text);
    const files = tsFiles(new Set(['node_modules', 'test', 'bench', 'docs', 'openapi', 'clients', 'tools', 'deploy', 'samples', 'examples', 'web/ui']));
    expect(files).toContain('vendors/registry.ts');
    const naming = files.filter((f) => !/^vendors\/[^/]+\/simulator\.ts$/.test(f) && importsSimulator(readFileSync(f, 'utf8')));
    expect(naming).toEqual([]);
    // The check sees such an import: the simulator's registry has one.
    expect(importsSimulator(readFileSync('tools/sim/protocols/index.ts', 'utf8'))).toBe(true);
  });
});

