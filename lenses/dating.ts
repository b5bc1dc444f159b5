import { z } from 'zod';
import { confidence, photoYear } from './fields.ts';
import { defineLens } from './types.ts';

const output = z.strictObject({
  estimatedDate: z.strictObject({
    date: z
      .string()
      .nullable()
      .describe('ISO 8601 at the precision actually supported: YYYY, YYYY-MM or YYYY-MM-DD; null if no year can be given'),
    year: photoYear().nullable().describe('Single most likely year'),
    earliestYear: photoYear().nullable(),
    latestYear: photoYear().nullable(),
    precision: z.enum(['day', 'month', 'year', 'decade', 'era']),
    confidence: confidence(),
    reasoning: z.string().describe('One or two sentences naming the anchors that drive the estimate'),
  }),
  dateAnchors: z
    .array(
      z.strictObject({
        type: z.enum([
          'printed-date',
          'photo-process',
          'vehicle',
          'clothing',
          'hairstyle',
          'technology',
          'architecture',
          'signage',
          'product-packaging',
          'event',
          'known-person-age',
          'other',
        ]),
        description: z.string(),
        earliestYear: photoYear().nullable(),
        latestYear: photoYear().nullable(),
        confidence: confidence(),
      }),
    )
    .describe('Visible evidence for the date, strongest first'),
  season: z.strictObject({
    name: z.enum(['spring', 'summer', 'autumn', 'winter', 'dry-season', 'wet-season']).nullable(),
    evidence: z.string().nullable(),
    confidence: confidence(),
  }),
  holiday: z.strictObject({
    name: z.string().nullable().describe('Holiday or occasion, e.g. Christmas, Diwali, a birthday; null if none is evident'),
    evidence: z.string().nullable(),
    confidence: confidence(),
  }),
});

export const dating = defineLens({
  name: 'dating',
  reads: ['knownPeople'],
  description:
    'Estimates when the photo was taken (date, year range, precision) from visible anchors such as vehicles, fashion, technology, print process and printed dates; also season and holiday.',
  category: 'temporal',
  billable: true,
  version: '1.0.0',
  output,
  prompt: [
    'Estimate when this photograph was taken.',
    '- List the concrete visual anchors first (date stamps, print borders and process, vehicles, clothing, hairstyles, devices, architecture, packaging), each with the year range it supports.',
    '- estimatedDate: intersect the anchor ranges; give `year` as the most likely single year and `earliestYear`/`latestYear` as a range you would bet on. `date` carries only the precision you can defend (a bare "1974" is better than an invented day).',
    '- A printed or stamped date is strong evidence but can be wrong (unset camera clocks); say so in `reasoning` if other anchors disagree.',
    '- If known people with birth or death years are supplied, they are anchors (type known-person-age) only for a person the photo gives evidence for (a caption, a role that fits): an apparent age plus the birth year bounds the date, and a death year bounds the latest date. Never treat an unconfirmed face as a known person.',
    '- season and holiday: only from visible evidence (foliage, snow, decorations, costumes). Use null names when nothing is evident.',
  ].join('\n'),
  defaultColumns: [
    { label: 'Estimated date', jsonPath: 'output.estimatedDate.date', format: 'date' },
    { label: 'Year', jsonPath: 'output.estimatedDate.year', format: 'number' },
    { label: 'Earliest year', jsonPath: 'output.estimatedDate.earliestYear', format: 'number' },
    { label: 'Latest year', jsonPath: 'output.estimatedDate.latestYear', format: 'number' },
    { label: 'Date confidence', jsonPath: 'output.estimatedDate.confidence', format: 'percentage' },
    { label: 'Season', jsonPath: 'output.season.name', format: 'string' },
    { label: 'Holiday', jsonPath: 'output.holiday.name', format: 'string' },
  ],
  fixture: {
    estimatedDate: {
      date: '1978',
      year: 1978,
      earliestYear: 1975,
      latestYear: 1981,
      precision: 'year',
      confidence: 0.72,
      reasoning:
        'The square print with a white border and warm colour shift suggests late-1970s instant film; the station wagon in the background was sold from 1975.',
    },
    dateAnchors: [
      {
        type: 'photo-process',
        description: 'Square instant print with a wide bottom border and magenta colour cast',
        earliestYear: 1972,
        latestYear: 1985,
        confidence: 0.8,
      },
      {
        type: 'vehicle',
        description: 'Wood-panelled station wagon parked at the kerb',
        earliestYear: 1975,
        latestYear: 1981,
        confidence: 0.65,
      },
      {
        type: 'clothing',
        description: 'Wide shirt collars and flared trousers',
        earliestYear: 1970,
        latestYear: 1980,
        confidence: 0.6,
      },
    ],
    season: { name: 'winter', evidence: 'Snow on the lawn and bare trees', confidence: 0.85 },
    holiday: { name: 'Christmas', evidence: 'Decorated tree and wrapped presents by the window', confidence: 0.78 },
  },
});
