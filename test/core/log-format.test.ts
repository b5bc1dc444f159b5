import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../core/config.ts';
import { logFormat } from '../../core/logger.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

// One log line from the real createLogger, in a child process whose stdout we choose.
const PROGRAM = `
import { loadConfig } from './core/config.ts';
import { createLogger } from './core/logger.ts';
createLogger(loadConfig(), 'worker').info({ workflowId: 'analyze:usr_1:req_1' }, 'vendor call started');
`;
const NODE_ARGS = ['--import', 'tsx', '--input-type=module', '-e', PROGRAM];

function env(extra: Record<string, string>): NodeJS.ProcessEnv {
  const { LOG_FORMAT: _unset, ...rest } = process.env;
  return { ...rest, LOG_LEVEL: 'info', NO_COLOR: '1', ...extra };
}

describe('LOG_FORMAT', () => {
  it('auto is pretty on a terminal and JSON otherwise; json and pretty are taken as said', () => {
    expect(logFormat('auto', true)).toBe('pretty');
    expect(logFormat('auto', false)).toBe('json');
    expect(logFormat('auto', undefined)).toBe('json');
    expect(logFormat('json', true)).toBe('json');
    expect(logFormat('pretty', false)).toBe('pretty');
    expect(loadConfig({}).LOG_FORMAT).toBe('auto');
    expect(() => loadConfig({ LOG_FORMAT: 'yaml' })).toThrow(ConfigError);
  });

  it('a process whose stdout is a pipe writes JSON lines', () => {
    const r = spawnSync(process.execPath, NODE_ARGS, { cwd: ROOT, env: env({}), encoding: 'utf8' });
    expect(r.stderr).toBe('');
    const line = JSON.parse(r.stdout.trim()) as Record<string, unknown>;
    expect(line).toMatchObject({ level: 30, service: 'worker', msg: 'vendor call started', workflowId: 'analyze:usr_1:req_1' });
  });

  it('a process on a terminal (a real pty from script(1)) writes one readable line, led by its service', () => {
    const command = [process.execPath, ...NODE_ARGS].map((a) => `'${a.replace(/'/g, `'\\''`)}'`).join(' ');
    const r = spawnSync('script', ['-qec', command, '/dev/null'], { cwd: ROOT, env: env({}), encoding: 'utf8' });
    expect(r.status).toBe(0);
    const out = r.stdout.replace(/\r/g, '').trim();
    expect(out).toMatch(/^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: \[worker\] vendor call started \{"workflowId":"analyze:usr_1:req_1"\}$/);
  });

  it('LOG_FORMAT=json keeps JSON on a terminal (a log shipper reading a pty)', () => {
    const command = [process.execPath, ...NODE_ARGS].map((a) => `'${a.replace(/'/g, `'\\''`)}'`).join(' ');
    const r = spawnSync('script', ['-qec', command, '/dev/null'], { cwd: ROOT, env: env({ LOG_FORMAT: 'json' }), encoding: 'utf8' });
    expect(r.status).toBe(0);
    expect(JSON.parse(r.stdout.replace(/\r/g, '').trim())).toMatchObject({ service: 'worker', msg: 'vendor call started' });
  });
});
