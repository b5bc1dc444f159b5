import { describe, expect, it } from 'vitest';
import { SimUsageError, simOptionsFrom } from '../../tools/sim/cli-options.ts';

describe('tools/sim/server.ts options', () => {
  it('defaults: port 4010 on loopback, no latency, no failures', () => {
    const o = simOptionsFrom([], {});
    expect(o).toMatchObject({ help: false, port: 4010, host: '127.0.0.1', seed: 'lenstack-sim', behaviour: {} });
    expect(o.vendors).toEqual({ openai: {}, anthropic: {}, google: {} });
  });

  it('flags for every vendor and per vendor', () => {
    const o = simOptionsFrom(
      ['--port', '0', '--seed', 's1', '--latency-ms', '20', '--failure', 'stall', '--anthropic-fail-rate', '0.5', '--google-failure', 'schema-invalid'],
      {},
    );
    expect(o).toMatchObject({ port: 0, seed: 's1', behaviour: { latencyMs: 20, failure: 'stall' } });
    expect(o.vendors).toEqual({ openai: {}, anthropic: { failRate: 0.5 }, google: { failure: 'schema-invalid' } });
  });

  it('SIM_* environment variables fill in, flags win', () => {
    const o = simOptionsFrom(['--fail-rate', '0.1'], { SIM_PORT: '5000', SIM_FAIL_RATE: '0.9', SIM_OPENAI_LATENCY_MS: '7' });
    expect(o).toMatchObject({ port: 5000, behaviour: { failRate: 0.1 } });
    expect(o.vendors?.openai).toEqual({ latencyMs: 7 });
  });

  it.each([
    [['--failure', 'explode']],
    [['--fail-rate', '1.5']],
    [['--latency-ms', '-1']],
    [['--port', '70000']],
    [['--mistral-failure', 'http500']],
  ])('refuses %j with usage help', (argv) => {
    expect(() => simOptionsFrom(argv, {})).toThrow(SimUsageError);
  });
});
