import { z } from 'zod';
import { hexColor } from './fields.ts';
import { defineLens } from './types.ts';

const output = z.strictObject({
  dominantColors: z
    .array(
      z.strictObject({
        hex: hexColor(),
        name: z.string().describe('Plain colour name, e.g. "burnt orange"'),
        share: z.number().min(0).max(1).describe('Approximate fraction of the image area'),
      }),
    )
    .describe('3 to 8 colours, largest share first; shares sum to at most 1'),
  accentColors: z
    .array(z.strictObject({ hex: hexColor(), name: z.string() }))
    .describe('Small but visually prominent colours, at most 4'),
  backgroundColor: hexColor().nullable().describe('Colour of a uniform background (product shots); null when there is none'),
  colorProperties: z.strictObject({
    temperature: z.enum(['warm', 'neutral', 'cool']),
    saturation: z.enum(['monochrome', 'muted', 'moderate', 'vibrant']),
    brightness: z.enum(['dark', 'balanced', 'bright']),
    contrast: z.enum(['low', 'medium', 'high']),
    blackAndWhite: z.boolean(),
    harmony: z
      .enum(['monochromatic', 'analogous', 'complementary', 'triadic', 'split-complementary', 'mixed'])
      .describe('Relationship between the dominant hues'),
  }),
});

export const colorPalette = defineLens({
  name: 'color-palette',
  description:
    'Extracts the colour palette: dominant colours as hex with their share of the image, accent colours, a uniform background colour, and overall temperature, saturation, brightness, contrast and harmony.',
  category: 'aesthetic',
  billable: true,
  version: '1.0.0',
  output,
  prompt: [
    'Extract the colour palette of the photograph.',
    '- dominantColors: 3 to 8 colours as #rrggbb with a plain name and the approximate fraction of the image area, largest first. Merge near-identical shades.',
    '- accentColors: small but eye-catching colours not already listed, at most 4.',
    '- backgroundColor: only for a uniform backdrop (studio or product shot); otherwise null.',
    '- colorProperties: overall temperature, saturation, brightness, contrast, whether the image is black-and-white, and the harmony of the main hues.',
  ].join('\n'),
  defaultColumns: [
    { label: 'Main colour', jsonPath: 'output.dominantColors.0.hex', format: 'hex' },
    { label: 'Main colour share', jsonPath: 'output.dominantColors.0.share', format: 'percentage' },
    { label: 'Palette', jsonPath: 'output.dominantColors.*.hex', format: 'tags' },
    { label: 'Colour temperature', jsonPath: 'output.colorProperties.temperature', format: 'string' },
  ],
  fixture: {
    dominantColors: [
      { hex: '#6b4a32', name: 'walnut brown', share: 0.31 },
      { hex: '#c9b48a', name: 'faded beige', share: 0.24 },
      { hex: '#2f4f3a', name: 'pine green', share: 0.17 },
      { hex: '#e8e2d6', name: 'off-white', share: 0.12 },
      { hex: '#a8322b', name: 'brick red', share: 0.08 },
    ],
    accentColors: [
      { hex: '#e0b321', name: 'toy yellow' },
      { hex: '#d9473b', name: 'ornament red' },
    ],
    backgroundColor: null,
    colorProperties: {
      temperature: 'warm',
      saturation: 'muted',
      brightness: 'balanced',
      contrast: 'medium',
      blackAndWhite: false,
      harmony: 'analogous',
    },
  },
});
