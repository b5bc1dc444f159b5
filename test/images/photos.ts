import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/** Real camera photos shared by the team (exif-samples, CC BY-SA 4.0; see ATTRIBUTION there). */
export const PHOTOS_DIR = '/work/shared/photos';

export function photo(name: string): Buffer {
  return readFileSync(join(PHOTOS_DIR, name));
}
