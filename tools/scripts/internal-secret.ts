import { randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * The INTERNAL_SECRET `npm start` makes when none is set: written to `<dataDir>/internal-secret`,
 * readable by its owner only, never printed (terminals end up in scrollback, CI logs and
 * screenshots). The message says where it is.
 */
export function generateInternalSecret(dataDir: string): { secret: string; file: string; message: string } {
  const secret = randomBytes(32).toString('hex');
  const file = join(dataDir, 'internal-secret');
  mkdirSync(dataDir, { recursive: true });
  writeFileSync(file, `${secret}\n`, { mode: 0o600 });
  chmodSync(file, 0o600); // `mode` applies only when the file is created
  return { secret, file, message: `INTERNAL_SECRET not set: generated one for this run, in ${file} (mode 0600; x-internal-secret for the internal endpoints)` };
}

/**
 * The console's AUTH_SECRET when none is set: kept in `<dataDir>/auth-secret` (mode 0600) and
 * reused on the next `npm start`, so restarting does not sign everyone out.
 */
export function localAuthSecret(dataDir: string): { secret: string; file: string; created: boolean } {
  const file = join(dataDir, 'auth-secret');
  try {
    const existing = readFileSync(file, 'utf8').trim();
    if (existing.length >= 32) return { secret: existing, file, created: false };
  } catch {
    // not made yet
  }
  const secret = randomBytes(32).toString('hex');
  mkdirSync(dataDir, { recursive: true });
  writeFileSync(file, `${secret}\n`, { mode: 0o600 });
  chmodSync(file, 0o600);
  return { secret, file, created: true };
}
