import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/** The shared real-camera photos (../shared/photos beside the checkout, as in CI). */
export const PHOTOS_DIR = fileURLToPath(new URL('../../../shared/photos/', import.meta.url));

export const photoBytes = (name: string): Buffer => readFileSync(PHOTOS_DIR + name);
export const photoBase64 = (name: string): string => photoBytes(name).toString('base64');
