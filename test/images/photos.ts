import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { PHOTOS_DIR } from '../helpers/photos.ts';

/** Real camera photos shared by the team (exif-samples, CC BY-SA 4.0; see ATTRIBUTION there). */
export { PHOTOS_DIR };

export function photo(name: string): Buffer {
  return readFileSync(join(PHOTOS_DIR, name));
}
