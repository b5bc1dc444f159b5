import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/** Real camera photos kept in the repo (test/fixtures/photos, CC BY-SA 4.0: see its ATTRIBUTION). */
export const PHOTOS_DIR = fileURLToPath(new URL('../fixtures/photos/', import.meta.url));

export const photoBytes = (name: string): Buffer => readFileSync(PHOTOS_DIR + name);
export const photoBase64 = (name: string): string => photoBytes(name).toString('base64');
