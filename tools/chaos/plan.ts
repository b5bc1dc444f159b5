import sharp from 'sharp';
import { intIn, pick, rngFor, type Rng } from '../../samples/random.ts';

/**
 * What a chaos run sends, decided entirely by the seed before anything starts: the users and
 * their balances, the photos, and every call (who, what, which request id). Timing and faults
 * change what the service answers, never what was asked.
 */

export interface PlannedUser {
  index: number;
  community: number;
  purchased: number;
}

export type CallKind = 'single' | 'repeat' | 'same-id' | 'multi' | 'refresh' | 'quick-scan' | 'vehicle' | 'extract';

export interface PlannedCall {
  index: number;
  user: number;
  kind: CallKind;
  path: '/v1/analyze' | '/v2/analyze';
  body: Record<string, unknown>;
  requestId: string;
  /** The workflow this request starts or attaches to (`<prefix>:<userId>:<requestId>`). */
  workflow: 'analyze' | 'vehicle';
  refresh: boolean;
  extract: boolean;
  /** repeat / same-id: the earlier call it copies. */
  of?: number;
}

export interface Plan {
  users: PlannedUser[];
  images: string[];
  calls: PlannedCall[];
}

const LENSES = ['dating', 'location', 'describe', 'people', 'atmosphere', 'composition'] as const;

/** Share of each kind among calls (repeat and same-id need an earlier call of the same user). */
const KIND_WEIGHTS: Array<[CallKind, number]> = [
  ['single', 0.4],
  ['repeat', 0.15],
  ['same-id', 0.05],
  ['multi', 0.12],
  ['refresh', 0.07],
  ['quick-scan', 0.1],
  ['vehicle', 0.05],
  ['extract', 0.06],
];

const EXTRACT_SCHEMA = {
  type: 'object',
  properties: {
    mainColour: { type: 'string', description: 'The dominant colour of the photo' },
    blockCount: { type: 'integer', description: 'How many distinct coloured blocks are visible' },
  },
  required: ['mainColour'],
};

function weighted<T>(rng: Rng, items: Array<[T, number]>): T {
  const total = items.reduce((n, [, w]) => n + w, 0);
  let r = rng() * total;
  for (const [item, w] of items) {
    if ((r -= w) < 0) return item;
  }
  return items[items.length - 1]![0];
}

/** Distinct small JPEGs (coloured block grids), the same bytes for the same seed and index. */
export async function planImages(seed: string, count: number): Promise<string[]> {
  const W = 160;
  const H = 120;
  const out: string[] = [];
  for (let i = 0; i < count; i++) {
    const rng = rngFor(`${seed}|image|${i}`);
    const px = Buffer.alloc(W * H * 3);
    const cols = intIn(rng, 3, 8);
    const rows = intIn(rng, 2, 6);
    const colours = Array.from({ length: cols * rows }, () => [intIn(rng, 0, 255), intIn(rng, 0, 255), intIn(rng, 0, 255)] as const);
    for (let y = 0; y < H; y++) {
      for (let x = 0; x < W; x++) {
        const c = colours[Math.floor((y * rows) / H) * cols + Math.floor((x * cols) / W)]!;
        const shade = (x + y) % 16;
        px.set([(c[0] + shade) & 255, (c[1] + shade) & 255, (c[2] + shade) & 255], (y * W + x) * 3);
      }
    }
    const jpeg = await sharp(px, { raw: { width: W, height: H, channels: 3 } }).jpeg({ quality: 85 }).toBuffer();
    out.push(jpeg.toString('base64'));
  }
  return out;
}

/** A request id the API accepts as x-request-id (/^[A-Za-z0-9._:-]{1,128}$/). */
function requestIdFor(seed: string, runTag: string, index: number): string {
  const safe = seed.replace(/[^A-Za-z0-9._-]/g, '_').slice(0, 40);
  return `chaos-${safe}-${runTag}-${index}`;
}

export async function makePlan(opts: { seed: string; runTag: string; calls: number; users: number; images: number }): Promise<Plan> {
  const rng = rngFor(`${opts.seed}|plan`);
  const users: PlannedUser[] = Array.from({ length: opts.users }, (_, index) => ({
    index,
    // Small balances: most users run out before their last call (402 is an expected answer).
    community: intIn(rng, 10, 45),
    purchased: rng() < 0.4 ? intIn(rng, 5, 25) : 0,
  }));
  const images = await planImages(opts.seed, opts.images);
  const seen: number[][] = users.map(() => []);
  const byUser: PlannedCall[][] = users.map(() => []);
  const photo = (u: number) => {
    const mine = seen[u]!;
    const idx = mine.length && rng() < 0.55 ? pick(rng, mine) : intIn(rng, 0, images.length - 1);
    if (!mine.includes(idx)) mine.push(idx);
    return idx;
  };
  const lenses = () => {
    const k = intIn(rng, 1, 3);
    const pool = [...LENSES];
    const chosen: string[] = [];
    while (chosen.length < k) chosen.push(pool.splice(Math.floor(rng() * pool.length), 1)[0]!);
    return chosen;
  };

  const calls: PlannedCall[] = [];
  for (let index = 0; index < opts.calls; index++) {
    const user = intIn(rng, 0, users.length - 1);
    let kind = weighted(rng, KIND_WEIGHTS);
    const earlier = byUser[user]!.filter((c) => c.kind !== 'same-id');
    if ((kind === 'repeat' || kind === 'same-id' || kind === 'refresh') && earlier.length === 0) kind = 'single';
    const base = { index, user, kind, requestId: requestIdFor(opts.seed, opts.runTag, index), refresh: false, extract: false };
    let call: PlannedCall;
    switch (kind) {
      case 'single':
        call = { ...base, path: '/v1/analyze', workflow: 'analyze', body: { imageBase64: images[photo(user)], modules: lenses() } };
        break;
      case 'repeat': {
        const of = pick(rng, earlier);
        call = { ...base, path: of.path, workflow: of.workflow, body: of.body, refresh: of.refresh, extract: of.extract, of: of.index };
        break;
      }
      case 'same-id': {
        // A client re-sending a request with its x-request-id: one analysis, billed once.
        const of = pick(rng, earlier);
        call = { ...base, path: of.path, workflow: of.workflow, body: of.body, refresh: of.refresh, extract: of.extract, of: of.index, requestId: of.requestId };
        break;
      }
      case 'multi': {
        const n = intIn(rng, 2, 4);
        const idx = Array.from({ length: n }, () => photo(user));
        // Now and then the same photo twice in one request (analyzed and billed once).
        if (rng() < 0.2) idx.push(idx[0]!);
        call = { ...base, path: '/v1/analyze', workflow: 'analyze', body: { images: idx.map((i) => ({ base64: images[i] })), modules: lenses() } };
        break;
      }
      case 'refresh': {
        // Refresh a photo this user already sent on its own, else a new one.
        const singles = earlier.filter((c) => typeof c.body.imageBase64 === 'string');
        const img = singles.length ? pick(rng, singles).body.imageBase64 : images[photo(user)];
        call = { ...base, path: '/v1/analyze', workflow: 'analyze', refresh: true, body: { imageBase64: img, modules: lenses(), refresh: true } };
        break;
      }
      case 'quick-scan':
        call = { ...base, path: '/v1/analyze', workflow: 'analyze', body: { imageBase64: images[photo(user)], preset: 'quick-scan' } };
        break;
      case 'vehicle': {
        const n = intIn(rng, 1, 3);
        call = {
          ...base,
          path: '/v1/analyze',
          workflow: 'vehicle',
          body: { images: Array.from({ length: n }, () => ({ base64: images[photo(user)] })), preset: 'vehicle-condition', context: { vehicle: { make: 'Volvo', model: '240', year: 1988 } } },
        };
        break;
      }
      case 'extract':
        call = { ...base, path: '/v2/analyze', workflow: 'analyze', extract: true, body: { imageBase64: images[photo(user)], modules: ['describe'], extract: { schema: EXTRACT_SCHEMA } } };
        break;
    }
    calls.push(call);
    byUser[user]!.push(call);
  }
  return { users, images, calls };
}
