#!/usr/bin/env node
// `npx lenstack` from a clone: runs the TypeScript CLI through tsx's loader (a dependency of the
// repository already), so there is no build step to forget.
import { register } from 'tsx/esm/api';

register();
const { main, cliEnv } = await import('../src/main.ts');
process.exitCode = await main(process.argv.slice(2), cliEnv(process.env), { stdout: process.stdout, stderr: process.stderr });
