import { z } from 'zod';
import { confidence, unitScore } from './fields.ts';
import { defineLens } from './types.ts';

const crop = z.strictObject({
  x: z.number().min(0).max(1),
  y: z.number().min(0).max(1),
  width: z.number().min(0).max(1),
  height: z.number().min(0).max(1),
});

const output = z.strictObject({
  framing: z.strictObject({
    shotType: z.enum(['extreme-close-up', 'close-up', 'medium', 'medium-wide', 'wide', 'extreme-wide']),
    cameraAngle: z.enum(['eye-level', 'high-angle', 'low-angle', 'overhead', 'worms-eye', 'dutch-tilt']),
    orientation: z.enum(['landscape', 'portrait', 'square']),
    depthOfField: z.enum(['shallow', 'moderate', 'deep']),
  }),
  compositionTechniques: z.array(
    z.strictObject({
      technique: z.enum([
        'rule-of-thirds',
        'centered',
        'symmetry',
        'leading-lines',
        'frame-within-frame',
        'negative-space',
        'patterns-repetition',
        'diagonals',
        'layering-depth',
        'golden-ratio',
        'fill-the-frame',
      ]),
      confidence: confidence(),
    }),
  ),
  subjectPlacement: z.strictObject({
    primarySubject: z.string(),
    position: z.enum(['center', 'left-third', 'right-third', 'upper-third', 'lower-third', 'off-frame-edge', 'spread']),
    frameCoverage: z.number().min(0).max(1).describe('Fraction of the frame the primary subject occupies'),
    clutter: z.enum(['minimal', 'moderate', 'busy']),
  }),
  compositionAssessment: z.strictObject({
    score: unitScore('Aesthetic composition score 0..1'),
    balance: z.enum(['balanced', 'left-heavy', 'right-heavy', 'top-heavy', 'bottom-heavy']),
    suggestions: z.array(z.string()).describe('Up to 3 concrete improvements'),
    suggestedCrop: crop
      .nullable()
      .describe('Crop rectangle (fractions of width/height, top-left origin) that improves the composition; null if none helps'),
  }),
});

export const composition = defineLens({
  name: 'composition',
  description:
    'Analyses framing (shot type, camera angle, orientation, depth of field), composition techniques, subject placement and clutter, and scores the composition with concrete suggestions and an optional improved crop.',
  category: 'aesthetic',
  billable: true,
  version: '1.0.0',
  output,
  prompt: [
    'Analyse the composition of the photograph as a photo editor would.',
    '- framing: shot type, camera angle, orientation and depth of field.',
    '- compositionTechniques: only techniques that are actually at work, each with a confidence.',
    '- subjectPlacement: the primary subject, where it sits, how much of the frame it fills and how cluttered the frame is.',
    '- compositionAssessment: a 0..1 score, the visual balance, up to three concrete suggestions, and a crop rectangle only if cropping clearly helps.',
  ].join('\n'),
  defaultColumns: [
    { label: 'Shot type', jsonPath: 'output.framing.shotType', format: 'string' },
    { label: 'Orientation', jsonPath: 'output.framing.orientation', format: 'string' },
    { label: 'Techniques', jsonPath: 'output.compositionTechniques.*.technique', format: 'tags' },
    { label: 'Primary subject', jsonPath: 'output.subjectPlacement.primarySubject', format: 'string' },
    { label: 'Composition score', jsonPath: 'output.compositionAssessment.score', format: 'percentage' },
  ],
  fixture: {
    framing: { shotType: 'medium-wide', cameraAngle: 'eye-level', orientation: 'square', depthOfField: 'deep' },
    compositionTechniques: [
      { technique: 'layering-depth', confidence: 0.7 },
      { technique: 'rule-of-thirds', confidence: 0.55 },
    ],
    subjectPlacement: { primarySubject: 'family group on the sofa', position: 'center', frameCoverage: 0.55, clutter: 'busy' },
    compositionAssessment: {
      score: 0.6,
      balance: 'left-heavy',
      suggestions: ['Crop the empty ceiling strip to tighten on the family', 'Straighten the slight clockwise tilt'],
      suggestedCrop: { x: 0.02, y: 0.1, width: 0.96, height: 0.88 },
    },
  },
});
