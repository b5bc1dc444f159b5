import type { Prng } from '../support/prng.ts';

/**
 * Seeded byte-level mutation of a file, the way file-format fuzzers (AFL's havoc stage, radamsa)
 * break parsers: bit flips, interesting values, block overwrite/insert/delete/duplicate, and
 * JPEG marker injection. Half of the edits land in the first 4 KiB, where headers, segment
 * lengths and dimensions live.
 */

const INTERESTING_BYTES = [0x00, 0x01, 0x7f, 0x80, 0xff];
const JPEG_MARKERS = [0xd8, 0xd9, 0xda, 0xc0, 0xc2, 0xc4, 0xdb, 0xdd, 0xe1, 0xfe];

export type MutationKind = 'bitflip' | 'byte' | 'interesting' | 'overwrite' | 'insert' | 'delete' | 'duplicate' | 'marker' | 'length';

export interface Mutant {
  bytes: Buffer;
  /** What was done, e.g. "bitflip@163 byte@9021", to reproduce by hand. */
  recipe: string;
}

export function mutate(original: Buffer, random: Prng, maxEdits = 8): Mutant {
  let b = Buffer.from(original);
  const recipe: string[] = [];
  const edits = random.range(1, maxEdits);
  for (let e = 0; e < edits && b.length > 4; e++) {
    const at = random.chance(0.5) ? random.int(Math.min(4096, b.length)) : random.int(b.length);
    const kind = random.pick<MutationKind>(['bitflip', 'bitflip', 'byte', 'interesting', 'overwrite', 'insert', 'delete', 'duplicate', 'marker', 'length']);
    switch (kind) {
      case 'bitflip':
        b[at] = b[at]! ^ (1 << random.int(8));
        break;
      case 'byte':
        b[at] = random.int(256);
        break;
      case 'interesting':
        b[at] = random.pick(INTERESTING_BYTES);
        break;
      case 'overwrite': {
        const len = random.range(2, 64);
        const fill = random.pick([0x00, 0xff, -1]);
        for (let i = at; i < Math.min(b.length, at + len); i++) b[i] = fill < 0 ? random.int(256) : fill;
        break;
      }
      case 'insert': {
        const extra = Buffer.from(Array.from({ length: random.range(1, 64) }, () => random.int(256)));
        b = Buffer.concat([b.subarray(0, at), extra, b.subarray(at)]);
        break;
      }
      case 'delete':
        b = Buffer.concat([b.subarray(0, at), b.subarray(Math.min(b.length, at + random.range(1, 256)))]);
        break;
      case 'duplicate': {
        const from = random.int(b.length);
        const block = b.subarray(from, from + random.range(1, 512));
        b = Buffer.concat([b.subarray(0, at), block, b.subarray(at)]);
        break;
      }
      case 'marker':
        b = Buffer.concat([b.subarray(0, at), Buffer.from([0xff, random.pick(JPEG_MARKERS)]), b.subarray(at)]);
        break;
      case 'length': {
        // A 16-bit big-endian field (JPEG segment lengths, dimensions) set to an edge value.
        const v = random.pick([0, 1, 2, 0x7fff, 0x8000, 0xfffe, 0xffff]);
        if (at + 1 < b.length) b.writeUInt16BE(v, at);
        break;
      }
    }
    recipe.push(`${kind}@${at}`);
  }
  return { bytes: b, recipe: recipe.join(' ') };
}
