import { z } from 'zod';
import { confidence, hexColor, photoYear } from './fields.ts';
import { defineLens } from './types.ts';

export const BODY_TYPES = [
  'sedan',
  'hatchback',
  'wagon',
  'suv',
  'crossover',
  'coupe',
  'convertible',
  'pickup',
  'van',
  'minivan',
  'truck',
  'bus',
  'motorcycle',
  'other',
] as const;

const output = z.strictObject({
  vehicleCount: z.int().min(0).describe('Motor vehicles visible, including background ones'),
  vehicles: z
    .array(
      z.strictObject({
        make: z.string().nullable(),
        model: z.string().nullable(),
        trim: z.string().nullable().describe('Trim, variant or generation when identifiable, e.g. "GTI", "Mk7"'),
        yearFrom: photoYear().nullable().describe('First model year consistent with what is visible'),
        yearTo: photoYear().nullable().describe('Last model year consistent with what is visible'),
        bodyType: z.enum(BODY_TYPES),
        color: z.strictObject({ name: z.string(), hex: hexColor().nullable() }),
        view: z.enum(['front', 'rear', 'left', 'right', 'front-left', 'front-right', 'rear-left', 'rear-right', 'interior', 'top', 'partial']),
        plate: z.strictObject({
          visible: z.boolean(),
          legible: z.boolean(),
          region: z.string().nullable().describe('Country or state the plate format suggests, e.g. "DE", "US-CA"'),
        }),
        confidence: confidence().describe('Probability that make and model are both right'),
        evidence: z.string().describe('Badges, grille, lights or body lines that support the identification'),
      }),
    )
    .describe('Most prominent vehicle first, at most 10'),
});

export const automobile = defineLens({
  name: 'automobile',
  reads: ['vehicle'],
  description:
    'Identifies motor vehicles: make, model, trim, model-year range, body type, colour (name and hex), the view shown, licence-plate visibility, legibility and region, with confidence and the visual evidence used.',
  category: 'vehicle',
  billable: true,
  version: '1.0.0',
  output,
  prompt: [
    'Identify the motor vehicles in the photograph.',
    '- vehicles: the most prominent first, at most 10. make, model and trim only as far as badges, grille, lights and body lines support them; otherwise null. yearFrom/yearTo bound the model years consistent with what is visible (generation and facelift details).',
    '- If the request data includes a vehicle (make, model, year), check it against what you see and say in `evidence` whether the photo agrees; never copy it unverified.',
    '- plate: whether a licence plate is visible and legible and which region its format suggests. Do not transcribe the plate number here.',
    '- vehicleCount counts every motor vehicle, including background ones not listed.',
  ].join('\n'),
  defaultColumns: [
    { label: 'Make', jsonPath: 'output.vehicles.0.make', format: 'string' },
    { label: 'Model', jsonPath: 'output.vehicles.0.model', format: 'string' },
    { label: 'Year from', jsonPath: 'output.vehicles.0.yearFrom', format: 'number' },
    { label: 'Year to', jsonPath: 'output.vehicles.0.yearTo', format: 'number' },
    { label: 'Body type', jsonPath: 'output.vehicles.0.bodyType', format: 'string' },
    { label: 'Vehicle colour', jsonPath: 'output.vehicles.0.color.hex', format: 'hex' },
    { label: 'Vehicle confidence', jsonPath: 'output.vehicles.0.confidence', format: 'percentage' },
  ],
  fixture: {
    vehicleCount: 1,
    vehicles: [
      {
        make: 'Ford',
        model: 'LTD Country Squire',
        trim: null,
        yearFrom: 1975,
        yearTo: 1978,
        bodyType: 'wagon',
        color: { name: 'dark green with wood-grain panels', hex: '#2e4a36' },
        view: 'front-left',
        plate: { visible: true, legible: false, region: 'US' },
        confidence: 0.64,
        evidence: 'Simulated wood-grain side panels, stacked rectangular headlights and full-width chrome grille typical of the 1975–78 Country Squire.',
      },
    ],
  },
});
