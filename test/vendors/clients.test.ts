import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../core/config.ts';
import { createVisionClients, simBaseURL } from '../../vendors/index.ts';

const summary = (env: Record<string, string>) => {
  const built = createVisionClients(loadConfig(env));
  return {
    clients: built.clients.map((c) => ({ vendor: c.vendor, simulated: c.simulated, model: c.model })),
    simulated: built.simulated,
    warnings: built.warnings,
  };
};

describe('createVisionClients', () => {
  it('without keys and without SIM_VENDOR_URL: no client, and says so', () => {
    const s = summary({});
    expect(s.clients).toEqual([]);
    expect(s.warnings).toEqual([
      'openai: skipped (no OPENAI_API_KEY and no SIM_VENDOR_URL)',
      'anthropic: skipped (no ANTHROPIC_API_KEY and no SIM_VENDOR_URL)',
      'google: skipped (no GEMINI_API_KEY and no SIM_VENDOR_URL)',
      'no vision vendor is configured: every analysis will fail',
    ]);
  });

  it('SIM_VENDOR_URL only: every vendor simulated, in VENDOR_ORDER, with the configured models', () => {
    const s = summary({
      SIM_VENDOR_URL: 'http://127.0.0.1:4010/',
      VENDOR_ORDER: 'google,openai,anthropic',
      GEMINI_MODEL: 'gemini-x',
      OPENAI_MODEL: 'gpt-x',
      ANTHROPIC_MODEL: 'claude-x',
    });
    expect(s.clients).toEqual([
      { vendor: 'google', simulated: true, model: 'gemini-x' },
      { vendor: 'openai', simulated: true, model: 'gpt-x' },
      { vendor: 'anthropic', simulated: true, model: 'claude-x' },
    ]);
    expect(s.simulated).toEqual(['google', 'openai', 'anthropic']);
    expect(s.warnings).toContain('openai: no OPENAI_API_KEY; answers come from the SIMULATED vendor at http://127.0.0.1:4010/v1');
  });

  it('a vendor with its own key is real; the others fall back to the sim', () => {
    const s = summary({ SIM_VENDOR_URL: 'http://sim:4010', ANTHROPIC_API_KEY: 'sk-ant-x' });
    expect(s.clients.map((c) => [c.vendor, c.simulated])).toEqual([
      ['openai', true],
      ['anthropic', false],
      ['google', true],
    ]);
    expect(s.simulated).toEqual(['openai', 'google']);
  });

  it('keys without a sim: only the keyed vendors, nothing simulated', () => {
    const s = summary({ OPENAI_API_KEY: 'sk-x', GEMINI_API_KEY: 'g-x' });
    expect(s.clients.map((c) => c.vendor)).toEqual(['openai', 'google']);
    expect(s.simulated).toEqual([]);
    expect(s.warnings).toEqual(['anthropic: skipped (no ANTHROPIC_API_KEY and no SIM_VENDOR_URL)']);
  });

  it('VENDOR_ORDER restricts and orders; a repeated vendor is used once', () => {
    const s = summary({ SIM_VENDOR_URL: 'http://sim:4010', VENDOR_ORDER: 'anthropic,anthropic,openai' });
    expect(s.clients.map((c) => c.vendor)).toEqual(['anthropic', 'openai']);
  });
});

describe('simBaseURL: where each SDK must point to reach the sim', () => {
  it('openai needs /v1 (the SDK appends /chat/completions); anthropic and genai take the root', () => {
    expect(simBaseURL('openai', 'http://h:1/')).toBe('http://h:1/v1');
    expect(simBaseURL('anthropic', 'http://h:1//')).toBe('http://h:1');
    expect(simBaseURL('google', 'http://h:1')).toBe('http://h:1');
  });
});
