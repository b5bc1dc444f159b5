import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/** Real camera photos kept in the repo (test/fixtures/photos, CC BY-SA 4.0: see its ATTRIBUTION). */
export const PHOTOS_DIR = fileURLToPath(new URL('../fixtures/photos/', import.meta.url));

export const photoBytes = (name: string): Buffer => readFileSync(PHOTOS_DIR + name);
export const photoBase64 = (name: string): string => photoBytes(name).toString('base64');

/** Ten fixture photos that are ten different pictures to Lenstack (each billed on its own). */
export const DISTINCT_PHOTOS = [
  'Canon_40D.jpg', 'Nikon_D70.jpg', 'Pentax_K10D.jpg', 'gps-DSCN0010.jpg', 'gps-DSCN0012.jpg',
  'gps-DSCN0021.jpg', 'hdr-canon_hdr_NO.jpg', 'hdr-canon_hdr_YES.jpg', 'mobile-jolla.jpg', 'orientation-landscape_1.jpg',
];
