import type { LensName } from './types.ts';

/**
 * Names in the vehicle-condition stack that describe its pipeline rather than catalog lenses
 * (docs/contract.md "Resources": the first two names of the vehicle stack are not catalog lenses): `multi-image` = the request
 * carries an `images` set analysed as one subject, `multi-image-vehicle` = per-photo vehicle
 * fan-out (vehicle-photo.ts) followed by one synthesis call.
 */
export const PIPELINE_STEPS = ['multi-image', 'multi-image-vehicle'] as const;
export type PipelineStep = (typeof PIPELINE_STEPS)[number];

export interface Stack {
  name: string;
  description: string;
  /** Exactly what GET /v1/modules lists (as `modules`); moderation is added at resolution, not listed here. */
  lenses: readonly (LensName | PipelineStep)[];
  /** Why each lens is in the stack (docs and review; not on the wire). */
  rationale: Partial<Record<LensName | PipelineStep, string>>;
}

export const STACKS = [
  {
    name: 'full-analysis',
    description: 'Every selectable photo lens in one call: date, people, place, mood, quality, objects, composition, text, accessibility, description, condition, authenticity, colours and vehicles.',
    lenses: [
      'dating',
      'people',
      'location',
      'atmosphere',
      'photo-quality',
      'entities',
      'composition',
      'text-content',
      'accessibility',
      'describe',
      'condition',
      'authenticity',
      'color-palette',
      'automobile',
    ],
    rationale: {},
  },
  {
    name: 'quick-scan',
    description: 'Safety screening only: the free moderation lens, no billable lens.',
    lenses: ['moderation'],
    rationale: { moderation: 'The only lens: a free safety gate before anything else is paid for.' },
  },
  {
    name: 'automobile',
    description: 'Single-photo vehicle identification for listings and fleet intake: make, model, year range, body type and colour, visible condition, lettering and badges, photo quality and a listing-ready description.',
    lenses: ['automobile', 'condition', 'text-content', 'photo-quality', 'describe'],
    rationale: {
      automobile: 'The core: make, model, trim, year range, body type, colour, plate visibility.',
      condition: 'A buyer or fleet manager wants a condition grade and visible defects with the identification.',
      'text-content': 'Badges, trim lettering, window stickers and dealer signage confirm the identification and carry prices and specs.',
      'photo-quality': 'Listing platforms reject blurry or dark photos; tells the uploader to retake.',
      describe: 'Title, caption and tags ready for a listing page and search.',
    },
  },
  {
    name: 'claims',
    description: 'Insurance-claim evidence review for a photo: damage and condition, authenticity and editing checks, when and where it was taken, the weather at the time, what objects and documents are visible, and whether the photo is usable as evidence.',
    lenses: ['condition', 'authenticity', 'dating', 'location', 'atmosphere', 'entities', 'text-content', 'photo-quality', 'describe'],
    rationale: {
      condition: 'The damage itself: grade, defects, location and severity.',
      authenticity: 'Fraud control: AI-generated or edited evidence photos, screenshots and photos of screens.',
      dating: 'Whether the photo can predate the claimed loss (an old photo reused as new evidence).',
      location: 'Whether the scene fits the insured address or the claimed place of loss.',
      atmosphere: 'Weather and time of day back or contradict storm, hail and flood claims.',
      entities: 'Inventory of damaged objects and their brands for valuation.',
      'text-content': 'Serial numbers, receipts, labels and plates visible in the evidence.',
      'photo-quality': 'Whether the photo is good enough to assess, so the adjuster can ask for a retake early.',
      describe: 'A neutral narrative for the claim file.',
    },
  },
  {
    name: 'property',
    description: 'Real-estate listing and inspection photos: room and feature description, amenities, condition of finishes, photo and composition quality, light and mood, alt text for listing sites, and virtual-staging or editing detection.',
    lenses: ['describe', 'entities', 'condition', 'photo-quality', 'composition', 'atmosphere', 'accessibility', 'authenticity'],
    rationale: {
      describe: 'Listing copy and tags per photo (room type, features).',
      entities: 'Amenities, appliances and fixtures buyers filter on.',
      condition: 'Condition of finishes and visible defects (damp, cracks, wear) for inspections.',
      'photo-quality': 'Listing portals rank sharp, well-exposed photos higher.',
      composition: 'Wide-angle framing, verticals and crop suggestions for hero images.',
      atmosphere: 'Natural light, time of day and mood (twilight exteriors sell).',
      accessibility: 'Alt text for listing pages, which accessibility rules increasingly require.',
      authenticity: 'Virtual staging, sky replacement and object removal must be disclosed in many markets.',
    },
  },
  {
    name: 'ecommerce',
    description: 'Product photos for online shops and resale marketplaces: product title, caption and tags, detected product and brand, item condition, colour variants and background, photo and composition quality, label text and alt text.',
    lenses: ['describe', 'entities', 'condition', 'color-palette', 'photo-quality', 'composition', 'text-content', 'accessibility'],
    rationale: {
      describe: 'Product title, caption and search tags.',
      entities: 'The product, its category and visible brands.',
      condition: 'New / like-new / used grade and defects for resale marketplaces.',
      'color-palette': 'Colour names and hex for variant filters, plus the background colour marketplaces check (white backgrounds).',
      'photo-quality': 'Marketplace image guidelines (sharpness, exposure, resolution).',
      composition: 'Centering, fill of frame and a suggested crop for thumbnails.',
      'text-content': 'Sizes, model numbers, ingredients and care labels.',
      accessibility: 'Alt text for product pages (accessibility law applies to online shops).',
    },
  },
  {
    name: 'memorial',
    description: 'Family, genealogy and memorial photos: when the photo was taken, who is in it (matched only against the people you name), where, handwritten captions and inscriptions, the story of the scene, restoration needs and alt text for memorial pages.',
    lenses: ['dating', 'people', 'location', 'text-content', 'describe', 'photo-quality', 'accessibility'],
    rationale: {
      dating: 'Dating old prints is the first question in genealogy; holidays and seasons date family events.',
      people: 'Counts and describes people and matches them against context.knownPeople with birth and death years.',
      location: 'Where the family lived or travelled.',
      'text-content': 'Handwritten captions, studio stamps, inscriptions and gravestone text.',
      describe: 'A caption and description for the family archive.',
      'photo-quality': 'Fading, scratches and tears: whether restoration is worth it.',
      accessibility: 'Alt text for memorial and obituary pages.',
    },
  },
  {
    name: 'vehicle-condition',
    description: 'Multi-photo vehicle condition report (1 to 50 photos of one vehicle): per-photo findings, overall grade, de-duplicated damage, component grades, accident indicators, photo-set quality, missing views and vehicle context.',
    lenses: ['multi-image', 'multi-image-vehicle', 'vehicle-condition'],
    rationale: {
      'multi-image': 'The request\'s images are one subject, not independent photos.',
      'multi-image-vehicle': 'Per-photo vehicle fan-out (lenses/vehicle-photo.ts) before the synthesis.',
      'vehicle-condition': 'The internal synthesis lens producing the report (outputSchema "vehicle").',
    },
  },
] as const satisfies readonly Stack[];

export type StackName = (typeof STACKS)[number]['name'];
export const STACK_NAMES: readonly StackName[] = STACKS.map((s) => s.name);

/** The stack used when a request names neither `preset` nor `modules` (docs/decisions.md). */
export const DEFAULT_STACK: StackName = 'full-analysis';

export const isStackName = (s: unknown): s is StackName => typeof s === 'string' && (STACK_NAMES as readonly string[]).includes(s);

export function getStack(name: StackName): Stack {
  const stack = STACKS.find((s) => s.name === name);
  if (!stack) throw new Error(`unreachable: stack ${name}`);
  return stack;
}
