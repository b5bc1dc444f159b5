import { z } from 'zod';
import { confidence, severity, unitScore } from './fields.ts';
import { defineLens } from './types.ts';
import {
  ACCIDENT_INDICATOR_TYPES,
  CAMERA_DISTANCES,
  CAMERA_ELEVATIONS,
  DAMAGE_TYPES,
  PHOTO_ISSUES,
  STANDARD_VEHICLE_VIEWS,
  VEHICLE_COMPONENTS,
  VEHICLE_VIEWS,
} from './vehicle-vocabulary.ts';

const photoIndexes = z.array(z.int().min(0)).describe('0-based positions in the request\'s images array');
const CONTEXT_FIELDS = ['make', 'model', 'year', 'vin', 'mileage', 'color'] as const;

const output = z.strictObject({
  photos: z.array(
    z.strictObject({
      index: z.int().min(0).describe('0-based position in the request\'s images array'),
      view: z.enum(VEHICLE_VIEWS),
      angle: z.strictObject({ elevation: z.enum(CAMERA_ELEVATIONS), distance: z.enum(CAMERA_DISTANCES) }),
      usable: z.boolean(),
      observations: z.array(z.string()).describe('Short findings from this photo'),
    }),
  ),
  overallCondition: z.strictObject({
    grade: z.enum(['excellent', 'good', 'fair', 'poor', 'salvage']),
    score: unitScore('1 = showroom, 0 = write-off'),
    confidence: confidence().describe('Lower when views are missing or photos are poor'),
    summary: z.string(),
  }),
  observations: z
    .array(
      z.strictObject({
        component: z.enum(VEHICLE_COMPONENTS),
        type: z.enum(DAMAGE_TYPES),
        severity: severity(),
        description: z.string(),
        photoIndexes,
        confidence: confidence(),
      }),
    )
    .describe('Damage de-duplicated across photos: the same dent seen twice is one observation'),
  componentGrades: z.array(
    z.strictObject({
      component: z.enum(VEHICLE_COMPONENTS),
      grade: z.enum(['good', 'fair', 'poor', 'damaged', 'not-visible']),
      notes: z.string().nullable(),
    }),
  ),
  accidentIndicators: z.strictObject({
    likelihood: unitScore('Probability 0..1 of a past collision or structural repair'),
    indicators: z.array(
      z.strictObject({ type: z.enum(ACCIDENT_INDICATOR_TYPES), description: z.string(), photoIndexes }),
    ),
  }),
  photoQuality: z.strictObject({
    rating: z.enum(['good', 'acceptable', 'poor']),
    usablePhotoCount: z.int().min(0),
    issues: z.array(z.strictObject({ photoIndex: z.int().min(0), issue: z.enum(PHOTO_ISSUES), description: z.string() })),
  }),
  missingViews: z.array(z.enum(STANDARD_VEHICLE_VIEWS)).describe('Standard views no usable photo covers'),
  vehicleContext: z.strictObject({
    make: z.string().nullable(),
    model: z.string().nullable(),
    year: z.int().min(1886).max(2100).nullable(),
    vin: z.string().nullable(),
    mileage: z.int().min(0).nullable(),
    mileageUnit: z.enum(['km', 'mi']).nullable(),
    color: z.string().nullable(),
    sources: z
      .array(z.strictObject({ field: z.enum(CONTEXT_FIELDS), source: z.enum(['context', 'photos', 'context-confirmed']) }))
      .describe('Where each non-null value came from'),
    mismatches: z
      .array(
        z.strictObject({
          field: z.enum(CONTEXT_FIELDS),
          contextValue: z.string(),
          observedValue: z.string(),
          photoIndexes,
        }),
      )
      .describe('Caller-supplied values the photos contradict'),
    sameVehicleInAllPhotos: z.boolean().nullable().describe('False if the photos show more than one vehicle; null if undecidable'),
  }),
});

export const vehicleCondition = defineLens({
  name: 'vehicle-condition',
  reads: ['vehicle'],
  description:
    'Multi-photo vehicle condition report (internal: reachable only through the vehicle-condition stack): per-photo view and findings, overall grade, de-duplicated damage, per-component grades, accident indicators, photo-set quality, missing standard views, and the vehicle context echoed from the request or read from the photos.',
  category: 'vehicle',
  billable: false,
  internal: true,
  version: '1.0.0',
  output,
  prompt: [
    'You are writing one condition report for one vehicle from a set of inspection photos. Per-photo findings from a first pass are given in the request data; the photos are attached in the same order (index 0 first). Re-check the findings against the photos rather than copying them.',
    '- photos: one entry per photo with its index, view, angle, whether it is usable and its short observations.',
    '- observations: merge the same damage seen in several photos into one entry listing every photo index that shows it. Reflections, dirt and water are not damage.',
    '- componentGrades: every component the photos show; use not-visible for components that matter but are not covered.',
    '- overallCondition: grade and score the whole vehicle; lower the confidence when views are missing or photos are poor.',
    '- accidentIndicators: signs of past collision or repair, with the photos that show them; likelihood stays low without concrete signs.',
    '- photoQuality and missingViews: how good the set is and which standard views no usable photo covers.',
    '- vehicleContext: echo the caller\'s vehicle data, fill gaps from legible odometer and VIN photos, record each value\'s source, and list every value the photos contradict in mismatches. Never invent a VIN or mileage. sameVehicleInAllPhotos is false when colour, model or damage show different vehicles.',
  ].join('\n'),
  defaultColumns: [
    { label: 'Make', jsonPath: 'output.vehicleContext.make', format: 'string' },
    { label: 'Model', jsonPath: 'output.vehicleContext.model', format: 'string' },
    { label: 'Year', jsonPath: 'output.vehicleContext.year', format: 'number' },
    { label: 'VIN', jsonPath: 'output.vehicleContext.vin', format: 'string' },
    { label: 'Mileage', jsonPath: 'output.vehicleContext.mileage', format: 'number' },
    { label: 'Condition grade', jsonPath: 'output.overallCondition.grade', format: 'string' },
    { label: 'Condition score', jsonPath: 'output.overallCondition.score', format: 'percentage' },
    { label: 'Accident likelihood', jsonPath: 'output.accidentIndicators.likelihood', format: 'percentage' },
    { label: 'Missing views', jsonPath: 'output.missingViews', format: 'tags' },
  ],
  fixture: {
    photos: [
      {
        index: 0,
        view: 'front-left',
        angle: { elevation: 'eye-level', distance: 'full-vehicle' },
        usable: true,
        observations: ['Scratches on the left corner of the front bumper', 'Headlight lenses slightly hazed'],
      },
      {
        index: 1,
        view: 'rear-right',
        angle: { elevation: 'eye-level', distance: 'full-vehicle' },
        usable: true,
        observations: ['Dent in the rear right door with paint intact'],
      },
      {
        index: 2,
        view: 'odometer',
        angle: { elevation: 'high', distance: 'close-up' },
        usable: true,
        observations: ['Odometer reads 84,312 km', 'No warning lights lit'],
      },
    ],
    overallCondition: {
      grade: 'good',
      score: 0.74,
      confidence: 0.62,
      summary: 'Sound bodywork with two cosmetic defects; the left side, interior seats and engine bay were not photographed.',
    },
    observations: [
      {
        component: 'front-bumper',
        type: 'scratch',
        severity: 'minor',
        description: 'Two parallel clear-coat scratches on the left corner, about 15 cm long',
        photoIndexes: [0],
        confidence: 0.82,
      },
      {
        component: 'rear-right-door',
        type: 'dent',
        severity: 'moderate',
        description: 'Shallow dent about 8 cm across below the handle, paint unbroken',
        photoIndexes: [1],
        confidence: 0.77,
      },
    ],
    componentGrades: [
      { component: 'front-bumper', grade: 'fair', notes: 'Cosmetic scratches' },
      { component: 'headlights', grade: 'fair', notes: 'Lenses hazed' },
      { component: 'rear-right-door', grade: 'damaged', notes: 'Dent, paintless repair likely' },
      { component: 'dashboard-controls', grade: 'good', notes: null },
      { component: 'engine-bay', grade: 'not-visible', notes: null },
    ],
    accidentIndicators: { likelihood: 0.12, indicators: [] },
    photoQuality: { rating: 'good', usablePhotoCount: 3, issues: [] },
    missingViews: ['front', 'rear', 'left', 'right', 'front-right', 'rear-left', 'interior', 'vin-plate', 'engine-bay'],
    vehicleContext: {
      make: 'Volkswagen',
      model: 'Golf',
      year: 2017,
      vin: 'WVWZZZAUZHW123456',
      mileage: 84312,
      mileageUnit: 'km',
      color: 'silver',
      sources: [
        { field: 'make', source: 'context-confirmed' },
        { field: 'model', source: 'context-confirmed' },
        { field: 'year', source: 'context' },
        { field: 'vin', source: 'context' },
        { field: 'mileage', source: 'photos' },
        { field: 'color', source: 'photos' },
      ],
      mismatches: [{ field: 'mileage', contextValue: '80000', observedValue: '84312', photoIndexes: [2] }],
      sameVehicleInAllPhotos: true,
    },
  },
});
