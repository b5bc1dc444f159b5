import { z } from 'zod';
import { defineLens } from './types.ts';

export const MODERATION_CATEGORIES = [
  'sexual',
  'suggestive',
  'violence',
  'gore',
  'selfHarm',
  'hateSymbols',
  'drugs',
  'weapons',
] as const;

const likelihood = (what: string) => z.number().min(0).max(1).describe(`Likelihood 0..1 that the image contains ${what}`);

const output = z.strictObject({
  moderation: z.strictObject({
    flagged: z.boolean().describe('True when any category warrants review or blocking'),
    action: z.enum(['allow', 'review', 'block']),
    categories: z.strictObject({
      sexual: likelihood('nudity or sexual activity'),
      suggestive: likelihood('suggestive but non-explicit content'),
      violence: likelihood('violence or threats'),
      gore: likelihood('graphic injury, blood or death'),
      selfHarm: likelihood('self-harm'),
      hateSymbols: likelihood('hate symbols or extremist imagery'),
      drugs: likelihood('illegal drugs or drug use'),
      weapons: likelihood('weapons'),
    }),
    flaggedCategories: z.array(z.enum(MODERATION_CATEGORIES)),
    minorsPresent: z.boolean().nullable().describe('Someone who appears under 18 is visible; null if undecidable'),
    reason: z.string().nullable().describe('Short reason when flagged; null otherwise'),
  }),
});

export const moderation = defineLens({
  name: 'moderation',
  description:
    'Safety screening that runs on every photo, free of charge: likelihoods for sexual, suggestive, violent, gory, self-harm, hate, drug and weapon content, whether minors appear, and an allow/review/block recommendation.',
  category: 'safety',
  billable: false,
  version: '1.0.0',
  output,
  prompt: [
    'Screen the photograph for content safety.',
    '- categories: a likelihood 0..1 for each category. Context matters: a kitchen knife is not a weapon threat, a museum nude is suggestive at most, a hunting photo is not gore unless graphic.',
    '- flaggedCategories lists the categories at or above 0.5; flagged is true when that list is non-empty.',
    '- action: block for sexual content involving anyone who may be a minor, explicit sexual content or extreme gore; review for borderline cases; allow otherwise.',
    '- minorsPresent: whether anyone who appears under 18 is visible.',
  ].join('\n'),
  defaultColumns: [
    { label: 'Moderation', jsonPath: 'output.moderation.action', format: 'string' },
    { label: 'Flagged', jsonPath: 'output.moderation.flaggedCategories', format: 'tags' },
  ],
  fixture: {
    moderation: {
      flagged: false,
      action: 'allow',
      categories: { sexual: 0.01, suggestive: 0.02, violence: 0.01, gore: 0, selfHarm: 0, hateSymbols: 0, drugs: 0, weapons: 0.01 },
      flaggedCategories: [],
      minorsPresent: true,
      reason: null,
    },
  },
});
