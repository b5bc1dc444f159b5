import { z } from 'zod';
import { confidence, severity, unitScore } from './fields.ts';
import {
  ACCIDENT_INDICATOR_TYPES,
  CAMERA_DISTANCES,
  CAMERA_ELEVATIONS,
  DAMAGE_TYPES,
  PHOTO_ISSUES,
  VEHICLE_COMPONENTS,
  VEHICLE_VIEWS,
} from './vehicle-vocabulary.ts';

/**
 * Per-photo schema of the vehicle-condition stack's fan-out step: one vendor call per photo with
 * this schema, then one synthesis call with the vehicle-condition lens schema that receives these
 * findings as data. Not a catalog lens: it is never selectable, billed or stored on its own.
 */
export const vehiclePhotoOutput = z.strictObject({
  view: z.enum(VEHICLE_VIEWS),
  angle: z.strictObject({ elevation: z.enum(CAMERA_ELEVATIONS), distance: z.enum(CAMERA_DISTANCES) }),
  vehicleVisible: z.boolean().describe('False when the photo shows no vehicle (or only a document)'),
  visibleDamage: z.array(
    z.strictObject({
      component: z.enum(VEHICLE_COMPONENTS),
      type: z.enum(DAMAGE_TYPES),
      severity: severity(),
      description: z.string(),
      confidence: confidence(),
    }),
  ),
  accidentSigns: z.array(
    z.strictObject({ type: z.enum(ACCIDENT_INDICATOR_TYPES), description: z.string(), confidence: confidence() }),
  ),
  quality: z.strictObject({
    usable: z.boolean().describe('Good enough to judge the condition of what it shows'),
    score: unitScore('Technical photo quality 0..1'),
    issues: z.array(z.enum(PHOTO_ISSUES)),
  }),
  readings: z.strictObject({
    odometer: z.int().min(0).nullable().describe('Odometer value when the dashboard is legible'),
    odometerUnit: z.enum(['km', 'mi']).nullable(),
    vin: z.string().nullable().describe('VIN when a VIN plate or sticker is legible; [?] for unreadable characters'),
  }),
  identification: z.strictObject({
    make: z.string().nullable(),
    model: z.string().nullable(),
    color: z.string().nullable(),
  }),
  notes: z.array(z.string()).describe('Other observations relevant to condition, at most 5'),
});
export type VehiclePhotoOutput = z.infer<typeof vehiclePhotoOutput>;

export interface VehiclePhotoStep {
  name: 'vehicle-photo';
  version: string;
  output: typeof vehiclePhotoOutput;
  prompt: string;
  /** Sandbox/simulator answer for one photo; validates against `output`. */
  fixture: VehiclePhotoOutput;
}

export const vehiclePhoto: VehiclePhotoStep = {
  name: 'vehicle-photo',
  version: '1.0.0',
  output: vehiclePhotoOutput,
  prompt: [
    'This is one photo from a multi-photo vehicle inspection. Report only what this photo shows.',
    '- view: which standard view (or supplementary view) the photo is; angle: camera elevation and distance.',
    '- visibleDamage: each visible damage with the component, type, severity (minor, moderate, severe) and a confidence. Reflections, dirt, water drops and shadows are not damage; when in doubt lower the confidence rather than inventing damage.',
    '- accidentSigns: evidence of past collision or repair (uneven panel gaps, paint mismatch, overspray, replaced panels, deployed airbags, crumple or frame damage).',
    '- quality: whether the photo is good enough to judge what it shows, and why not.',
    '- readings: odometer and VIN only when legible in this photo; otherwise null. identification: make, model and colour as far as this photo shows them.',
  ].join('\n'),
  fixture: {
    view: 'front-left',
    angle: { elevation: 'eye-level', distance: 'full-vehicle' },
    vehicleVisible: true,
    visibleDamage: [
      {
        component: 'front-bumper',
        type: 'scratch',
        severity: 'minor',
        description: 'Two parallel scratches through the clear coat on the left corner',
        confidence: 0.82,
      },
    ],
    accidentSigns: [],
    quality: { usable: true, score: 0.86, issues: [] },
    readings: { odometer: null, odometerUnit: null, vin: null },
    identification: { make: 'Volkswagen', model: 'Golf', color: 'silver' },
    notes: ['Headlight lenses slightly hazed'],
  },
};
