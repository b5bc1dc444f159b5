import { z } from 'zod';
import { confidence } from './fields.ts';
import { defineLens } from './types.ts';

const output = z.strictObject({
  locationEstimate: z.strictObject({
    name: z.string().nullable().describe('Most specific place you can defend, e.g. "Pont Neuf, Paris"'),
    city: z.string().nullable(),
    region: z.string().nullable().describe('State, province or region'),
    country: z.string().nullable(),
    countryCode: z.string().nullable().describe('ISO 3166-1 alpha-2, upper case'),
    precision: z.enum(['exact-place', 'neighbourhood', 'city', 'region', 'country', 'continent', 'unknown']),
    confidence: confidence(),
    reasoning: z.string(),
  }),
  coordinates: z
    .strictObject({
      latitude: z.number().min(-90).max(90),
      longitude: z.number().min(-180).max(180),
      uncertaintyKm: z.number().min(0).describe('Radius within which you expect the true spot'),
      confidence: confidence(),
    })
    .nullable()
    .describe('Null unless the place is recognisable enough for a coordinate guess to be useful'),
  landmarks: z.array(
    z.strictObject({
      name: z.string(),
      type: z.enum(['building', 'monument', 'religious-site', 'bridge', 'tower', 'stadium', 'natural-feature', 'park', 'street', 'other']),
      confidence: confidence(),
    }),
  ),
  locationClues: z.array(
    z.strictObject({
      type: z.enum(['signage', 'language', 'architecture', 'vegetation', 'terrain', 'road-markings', 'vehicles', 'license-plates', 'landmark', 'climate', 'other']),
      description: z.string(),
    }),
  ),
  sceneSetting: z.strictObject({
    indoor: z.boolean(),
    environment: z.enum(['urban', 'suburban', 'rural', 'wilderness', 'coastal', 'mountain', 'desert', 'waterside', 'indoor', 'other']),
    placeType: z.string().nullable().describe('e.g. kitchen, beach, train station, church'),
  }),
});

export const location = defineLens({
  name: 'location',
  description:
    'Estimates where the photo was taken: place name, city, region, country (ISO code), an optional coordinate guess with uncertainty radius, recognised landmarks, the clues used, and the indoor/outdoor setting.',
  category: 'spatial',
  billable: true,
  version: '1.0.0',
  output,
  prompt: [
    'Estimate where this photograph was taken.',
    '- Work from visible clues (signs and their language, architecture, vegetation, terrain, road markings, plate formats, landmarks) and list them in locationClues.',
    '- locationEstimate: fill only the levels you can defend and set `precision` to the most specific one; leave the rest null. countryCode is ISO 3166-1 alpha-2.',
    '- coordinates: only when the place is recognisable (a landmark, a distinctive street); uncertaintyKm must be honest (a city-level guess is ~10 km, a country-level guess is useless, so use null).',
    '- landmarks: named, recognisable landmarks only; do not name a generic building.',
    '- Never infer a private address or a person\'s home location.',
  ].join('\n'),
  defaultColumns: [
    { label: 'Location', jsonPath: 'output.locationEstimate.name', format: 'string' },
    { label: 'City', jsonPath: 'output.locationEstimate.city', format: 'string' },
    { label: 'Country', jsonPath: 'output.locationEstimate.country', format: 'string' },
    { label: 'Location confidence', jsonPath: 'output.locationEstimate.confidence', format: 'percentage' },
    { label: 'Latitude', jsonPath: 'output.coordinates.latitude', format: 'number' },
    { label: 'Longitude', jsonPath: 'output.coordinates.longitude', format: 'number' },
    { label: 'Landmarks', jsonPath: 'output.landmarks.*.name', format: 'tags' },
  ],
  fixture: {
    locationEstimate: {
      name: 'Pont Neuf, Paris',
      city: 'Paris',
      region: 'Île-de-France',
      country: 'France',
      countryCode: 'FR',
      precision: 'exact-place',
      confidence: 0.82,
      reasoning: 'The stone arches with carved mascarons and the equestrian statue of Henri IV identify the Pont Neuf; French street signage on the quay agrees.',
    },
    coordinates: { latitude: 48.8571, longitude: 2.3413, uncertaintyKm: 0.3, confidence: 0.75 },
    landmarks: [
      { name: 'Pont Neuf', type: 'bridge', confidence: 0.84 },
      { name: 'Statue of Henri IV', type: 'monument', confidence: 0.7 },
    ],
    locationClues: [
      { type: 'signage', description: 'Blue enamel street sign reading "Quai des Grands Augustins"' },
      { type: 'architecture', description: 'Haussmann-style façades with zinc mansard roofs' },
    ],
    sceneSetting: { indoor: false, environment: 'urban', placeType: 'riverside bridge' },
  },
});
