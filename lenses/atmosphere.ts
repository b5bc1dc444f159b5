import { z } from 'zod';
import { confidence } from './fields.ts';
import { defineLens } from './types.ts';

const output = z.strictObject({
  mood: z.strictObject({
    primary: z.enum([
      'joyful',
      'calm',
      'romantic',
      'nostalgic',
      'melancholic',
      'solemn',
      'tense',
      'dramatic',
      'mysterious',
      'energetic',
      'festive',
      'neutral',
    ]),
    descriptors: z.array(z.string()).describe('Up to 5 lower-case mood words'),
    intensity: z.number().min(0).max(1).describe('How strongly the mood comes across'),
    confidence: confidence(),
  }),
  weather: z.strictObject({
    condition: z
      .enum(['clear', 'partly-cloudy', 'overcast', 'rain', 'drizzle', 'snow', 'fog', 'storm', 'hail', 'windy'])
      .nullable()
      .describe('Null indoors or when the sky and ground give no evidence'),
    evidence: z.string().nullable(),
    confidence: confidence(),
  }),
  lighting: z.strictObject({
    source: z.enum(['natural', 'artificial', 'mixed', 'flash']),
    quality: z.enum(['hard', 'soft', 'diffuse', 'dramatic', 'low-light', 'backlit']),
    colorTemperature: z.enum(['warm', 'neutral', 'cool']),
  }),
  timeOfDay: z.strictObject({
    period: z
      .enum(['dawn', 'morning', 'midday', 'afternoon', 'golden-hour', 'dusk', 'blue-hour', 'night'])
      .nullable()
      .describe('Null indoors without windows or when undecidable'),
    confidence: confidence(),
  }),
});

export const atmosphere = defineLens({
  name: 'atmosphere',
  description: 'Reads the mood of the photo and the conditions it was taken in: weather, lighting (source, quality, colour temperature) and time of day.',
  category: 'scene',
  billable: true,
  version: '1.0.0',
  output,
  prompt: [
    'Describe the atmosphere of the photograph.',
    '- mood: the emotional tone a viewer gets; `primary` from the list, up to five free descriptors, intensity 0..1.',
    '- weather: from the sky, ground, shadows, clothing and umbrellas. Use null indoors or without evidence; never guess rain from a grey filter alone.',
    '- lighting: the dominant light source, its quality and colour temperature.',
    '- timeOfDay: from sun angle, shadow length, sky colour and artificial lights; null when undecidable.',
  ].join('\n'),
  defaultColumns: [
    { label: 'Mood', jsonPath: 'output.mood.primary', format: 'string' },
    { label: 'Mood words', jsonPath: 'output.mood.descriptors', format: 'tags' },
    { label: 'Weather', jsonPath: 'output.weather.condition', format: 'string' },
    { label: 'Lighting', jsonPath: 'output.lighting.source', format: 'string' },
    { label: 'Time of day', jsonPath: 'output.timeOfDay.period', format: 'string' },
  ],
  fixture: {
    mood: { primary: 'festive', descriptors: ['warm', 'cosy', 'joyful', 'intimate'], intensity: 0.7, confidence: 0.8 },
    weather: { condition: 'snow', evidence: 'Snow falling past the window and on the lawn outside', confidence: 0.7 },
    lighting: { source: 'mixed', quality: 'soft', colorTemperature: 'warm' },
    timeOfDay: { period: 'morning', confidence: 0.55 },
  },
});
