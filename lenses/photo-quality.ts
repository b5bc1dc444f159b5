import { z } from 'zod';
import { severity, unitScore } from './fields.ts';
import { defineLens } from './types.ts';

const output = z.strictObject({
  qualityScores: z.strictObject({
    overall: unitScore('Overall technical quality 0..1'),
    sharpness: unitScore('1 = critically sharp on the subject'),
    exposure: unitScore('1 = well exposed, no clipped highlights or crushed shadows'),
    noise: unitScore('1 = clean, 0 = heavy noise or grain'),
    colorAccuracy: unitScore('1 = neutral white balance, no colour cast or fading'),
  }),
  qualityIssues: z.array(
    z.strictObject({
      type: z.enum([
        'motion-blur',
        'out-of-focus',
        'camera-shake',
        'overexposed',
        'underexposed',
        'noise',
        'compression-artifacts',
        'low-resolution',
        'color-cast',
        'fading',
        'scratches-dust',
        'tear-crease',
        'lens-flare',
        'tilted-horizon',
        'obstruction',
        'red-eye',
        'chromatic-aberration',
        'other',
      ]),
      severity: severity(),
      description: z.string(),
    }),
  ),
  qualityVerdict: z.strictObject({
    rating: z.enum(['excellent', 'good', 'acceptable', 'poor', 'unusable']),
    suitableFor: z.array(z.enum(['print', 'web', 'social', 'listing', 'evidence', 'archive'])),
    restorationRecommended: z.boolean().describe('Damage or fading that restoration would fix'),
    summary: z.string(),
  }),
});

export const photoQuality = defineLens({
  name: 'photo-quality',
  description:
    'Scores technical quality (overall, sharpness, exposure, noise, colour accuracy on 0..1), lists defects with severity (blur, exposure, compression, fading, scratches…), and gives a verdict with suitable uses.',
  category: 'technical',
  billable: true,
  version: '1.0.0',
  output,
  prompt: [
    'Assess the technical quality of the photograph as an image file or a scanned print, not its content.',
    '- qualityScores: 0..1 per dimension, judged on the main subject. A deliberately soft background is not a sharpness defect.',
    '- qualityIssues: each defect you can see with a severity. For scanned prints include fading, colour shift, scratches, dust, tears and creases.',
    '- qualityVerdict: an overall rating, the uses the image is good enough for, and whether restoration is worth it.',
  ].join('\n'),
  defaultColumns: [
    { label: 'Quality', jsonPath: 'output.qualityScores.overall', format: 'percentage' },
    { label: 'Sharpness', jsonPath: 'output.qualityScores.sharpness', format: 'percentage' },
    { label: 'Exposure', jsonPath: 'output.qualityScores.exposure', format: 'percentage' },
    { label: 'Noise', jsonPath: 'output.qualityScores.noise', format: 'percentage' },
    { label: 'Quality rating', jsonPath: 'output.qualityVerdict.rating', format: 'string' },
    { label: 'Quality issues', jsonPath: 'output.qualityIssues.*.type', format: 'tags' },
  ],
  fixture: {
    qualityScores: { overall: 0.58, sharpness: 0.62, exposure: 0.7, noise: 0.55, colorAccuracy: 0.35 },
    qualityIssues: [
      { type: 'color-cast', severity: 'moderate', description: 'Magenta shift typical of ageing instant film' },
      { type: 'fading', severity: 'moderate', description: 'Blacks have faded to brown and the highlights are yellowed' },
      { type: 'scratches-dust', severity: 'minor', description: 'A few dust specks and a fine scratch across the upper right' },
    ],
    qualityVerdict: {
      rating: 'acceptable',
      suitableFor: ['web', 'social', 'archive'],
      restorationRecommended: true,
      summary: 'Sharp enough for on-screen use; colour restoration would recover the faded print.',
    },
  },
});
