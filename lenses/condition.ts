import { z } from 'zod';
import { confidence, unitScore } from './fields.ts';
import { defineLens } from './types.ts';

const output = z.strictObject({
  itemCondition: z.strictObject({
    subject: z.string().describe('The item, object or structure that was assessed, e.g. "leather armchair", "bathroom", "roof"'),
    subjectCategory: z.enum([
      'furniture',
      'electronics',
      'clothing',
      'footwear',
      'jewellery-watch',
      'collectible',
      'appliance',
      'vehicle',
      'building-interior',
      'building-exterior',
      'tool-equipment',
      'document-artwork',
      'other',
    ]),
    grade: z.enum(['new', 'like-new', 'excellent', 'good', 'fair', 'poor', 'damaged']),
    score: unitScore('1 = flawless, 0 = destroyed'),
    confidence: confidence(),
    summary: z.string(),
  }),
  defects: z.array(
    z.strictObject({
      type: z.enum([
        'scratch',
        'dent',
        'chip',
        'crack',
        'break',
        'tear',
        'stain',
        'discoloration',
        'fading',
        'wear',
        'rust-corrosion',
        'water-damage',
        'mold',
        'fire-smoke-damage',
        'missing-part',
        'other',
      ]),
      location: z.string().describe('Where on the subject, e.g. "front left leg"'),
      severity: z.enum(['cosmetic', 'moderate', 'structural']),
      description: z.string(),
      confidence: confidence(),
    }),
  ),
  conditionLimitations: z
    .array(z.string())
    .describe('What the photo cannot show (hidden sides, function, smell, scale) so the grade is read with care'),
});

export const condition = defineLens({
  name: 'condition',
  reads: ['vehicle'],
  description:
    'Grades the physical condition of the main item, object or structure (new … damaged, 0..1 score), lists visible defects with location and severity, and states what the photo cannot show.',
  category: 'inspection',
  billable: true,
  version: '1.0.0',
  output,
  prompt: [
    'Assess the physical condition of the main subject of the photograph (an item for sale, a piece of furniture, a room, a building part, a vehicle as an object).',
    '- itemCondition: name the subject, grade it on the scale new, like-new, excellent, good, fair, poor, damaged, and give a 0..1 score consistent with the grade.',
    '- defects: every visible defect with where it is, its severity (cosmetic, moderate, structural) and a confidence. Do not report lighting, reflections or dust on the lens as defects.',
    '- conditionLimitations: what a single photo cannot show. Never claim an item works or is genuine.',
  ].join('\n'),
  defaultColumns: [
    { label: 'Subject', jsonPath: 'output.itemCondition.subject', format: 'string' },
    { label: 'Condition', jsonPath: 'output.itemCondition.grade', format: 'string' },
    { label: 'Condition score', jsonPath: 'output.itemCondition.score', format: 'percentage' },
    { label: 'Defects', jsonPath: 'output.defects.*.type', format: 'tags' },
  ],
  fixture: {
    itemCondition: {
      subject: 'patterned three-seat sofa',
      subjectCategory: 'furniture',
      grade: 'good',
      score: 0.7,
      confidence: 0.6,
      summary: 'Upholstery is intact with light wear on the armrests; no structural damage visible.',
    },
    defects: [
      { type: 'wear', location: 'left armrest', severity: 'cosmetic', description: 'Fabric pile worn smooth', confidence: 0.65 },
      { type: 'fading', location: 'back cushions', severity: 'cosmetic', description: 'Pattern slightly faded where sunlight falls', confidence: 0.5 },
    ],
    conditionLimitations: ['The back and underside of the sofa are not visible', 'Cushion firmness and odour cannot be judged from a photo'],
  },
});
