import { describe, expect, it } from 'vitest';
import { escapeHelp, escapeLabelValue, formatValue, Registry } from '../../metrics/registry.ts';

describe('Prometheus text exposition', () => {
  it('escapes backslash, double quote and line feed in label values, and backslash and line feed in HELP', () => {
    expect(escapeLabelValue('a\\b"c\nd')).toBe('a\\\\b\\"c\\nd');
    expect(escapeHelp('line one\nback\\slash "quotes" stay')).toBe('line one\\nback\\\\slash "quotes" stay');
    const r = new Registry();
    const c = r.counter({ name: 'odd_total', help: 'odd\nhelp', labelNames: ['route'] });
    c.inc({ route: '/x/"y"\\z\n' });
    expect(r.expose()).toBe('# HELP odd_total odd\\nhelp\n# TYPE odd_total counter\nodd_total{route="/x/\\"y\\"\\\\z\\n"} 1\n');
  });

  it('writes counters per label set, in registration order, ending with a line feed', () => {
    const r = new Registry();
    const calls = r.counter({ name: 'calls_total', help: 'Calls.', labelNames: ['vendor', 'task'] });
    const plain = r.counter({ name: 'plain_total', help: 'No labels.' });
    calls.inc({ vendor: 'openai', task: 'lenses' });
    calls.inc({ vendor: 'openai', task: 'lenses' }, 2);
    calls.inc({ vendor: 'google', task: 'lenses' });
    plain.inc({}, 0.5);
    expect(r.expose()).toBe(
      [
        '# HELP calls_total Calls.',
        '# TYPE calls_total counter',
        'calls_total{vendor="openai",task="lenses"} 3',
        'calls_total{vendor="google",task="lenses"} 1',
        '# HELP plain_total No labels.',
        '# TYPE plain_total counter',
        'plain_total 0.5',
        '',
      ].join('\n'),
    );
    expect(() => calls.inc({ vendor: 'openai', task: 'lenses' }, -1)).toThrow(/only go up/);
  });

  it('writes histograms with cumulative buckets, +Inf, sum and count', () => {
    const r = new Registry();
    const h = r.histogram({ name: 'wait_seconds', help: 'Waits.', labelNames: ['outcome'], buckets: [1, 0.1, 10] });
    for (const v of [0.05, 0.1, 0.5, 3, 60]) h.observe({ outcome: 'ok' }, v);
    expect(r.expose().split('\n')).toEqual([
      '# HELP wait_seconds Waits.',
      '# TYPE wait_seconds histogram',
      'wait_seconds_bucket{outcome="ok",le="0.1"} 2',
      'wait_seconds_bucket{outcome="ok",le="1"} 3',
      'wait_seconds_bucket{outcome="ok",le="10"} 4',
      'wait_seconds_bucket{outcome="ok",le="+Inf"} 5',
      'wait_seconds_sum{outcome="ok"} 63.65',
      'wait_seconds_count{outcome="ok"} 5',
      '',
    ]);
  });

  it('gauges go both ways; sampled values are read at scrape time', () => {
    const r = new Registry();
    const g = r.gauge({ name: 'in_flight', help: 'In flight.' });
    let rss = 10;
    r.sampled({ name: 'rss_bytes', help: 'RSS.', type: 'gauge', read: () => rss });
    g.inc({});
    g.inc({});
    g.dec({});
    rss = 42;
    expect(r.expose()).toContain('in_flight 1\n');
    expect(r.expose()).toContain('# TYPE rss_bytes gauge\nrss_bytes 42\n');
    expect(formatValue(Infinity)).toBe('+Inf');
    expect(formatValue(Number.NaN)).toBe('NaN');
  });

  it('refuses invalid names, the reserved le label, a missing label and a name registered twice', () => {
    const r = new Registry();
    expect(() => r.counter({ name: 'bad-name', help: '' })).toThrow(/invalid metric name/);
    expect(() => r.histogram({ name: 'h', help: '', labelNames: ['le'], buckets: [1] })).toThrow(/invalid label name/);
    const c = r.counter({ name: 'c_total', help: '', labelNames: ['a'] });
    expect(() => c.inc({} as { a: string })).toThrow(/needs label a/);
    expect(() => r.counter({ name: 'c_total', help: '' })).toThrow(/registered twice/);
  });
});
