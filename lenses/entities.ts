import { z } from 'zod';
import { boundingBox, confidence } from './fields.ts';
import { defineLens } from './types.ts';

const output = z.strictObject({
  objects: z
    .array(
      z.strictObject({
        name: z.string().describe('Singular, lower-case common noun, e.g. "bicycle"'),
        category: z.enum([
          'furniture',
          'electronics',
          'vehicle',
          'food-drink',
          'clothing-accessory',
          'tool',
          'sports-equipment',
          'toy',
          'document',
          'artwork',
          'plant',
          'building-structure',
          'kitchenware',
          'musical-instrument',
          'other',
        ]),
        count: z.int().min(1),
        prominence: z.enum(['primary', 'secondary', 'background']),
        boundingBox: boundingBox().describe('Box of the most prominent instance; null if unsure'),
        confidence: confidence(),
      }),
    )
    .describe('Distinct object kinds, most prominent first, at most 30'),
  brands: z.array(
    z.strictObject({
      name: z.string(),
      evidence: z.enum(['logo', 'text', 'distinctive-design', 'packaging']),
      onObject: z.string().nullable().describe('Name of the object carrying the brand'),
      confidence: confidence(),
    }),
  ),
  animals: z.array(
    z.strictObject({
      commonName: z.string(),
      species: z.string().nullable().describe('Scientific name when identifiable'),
      count: z.int().min(1),
      domestic: z.boolean(),
      confidence: confidence(),
    }),
  ),
});

export const entities = defineLens({
  name: 'entities',
  description: 'Detects the objects, brands and animals in the photo, with counts, prominence, an optional bounding box and confidence for each.',
  category: 'general',
  billable: true,
  version: '1.0.0',
  output,
  prompt: [
    'List what is in the photograph.',
    '- objects: one entry per kind of object (count the instances), most prominent first, at most 30. People are not objects here. Give a bounding box for the most prominent instance only if you can localise it.',
    '- brands: only when a logo, brand text, packaging or an unmistakable design is visible; say which. Do not infer a brand from a generic shape.',
    '- animals: common name, scientific name when identifiable, count, domestic or wild.',
  ].join('\n'),
  defaultColumns: [
    { label: 'Objects', jsonPath: 'output.objects.*.name', format: 'tags' },
    { label: 'Brands', jsonPath: 'output.brands.*.name', format: 'tags' },
    { label: 'Animals', jsonPath: 'output.animals.*.commonName', format: 'tags' },
  ],
  fixture: {
    objects: [
      { name: 'christmas tree', category: 'plant', count: 1, prominence: 'primary', boundingBox: { x: 0.02, y: 0.05, width: 0.22, height: 0.85 }, confidence: 0.95 },
      { name: 'sofa', category: 'furniture', count: 1, prominence: 'secondary', boundingBox: { x: 0.05, y: 0.45, width: 0.6, height: 0.4 }, confidence: 0.92 },
      { name: 'wrapped present', category: 'other', count: 6, prominence: 'secondary', boundingBox: null, confidence: 0.88 },
      { name: 'toy truck', category: 'toy', count: 1, prominence: 'secondary', boundingBox: { x: 0.7, y: 0.78, width: 0.12, height: 0.1 }, confidence: 0.8 },
      { name: 'television', category: 'electronics', count: 1, prominence: 'background', boundingBox: { x: 0.82, y: 0.2, width: 0.15, height: 0.18 }, confidence: 0.7 },
    ],
    brands: [{ name: 'Tonka', evidence: 'logo', onObject: 'toy truck', confidence: 0.62 }],
    animals: [{ commonName: 'dog', species: 'Canis familiaris', count: 1, domestic: true, confidence: 0.9 }],
  },
});
