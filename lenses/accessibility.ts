import { z } from 'zod';
import { defineLens } from './types.ts';

const output = z.strictObject({
  altText: z.string().describe('Concise alt text, about 125 characters, no "image of" prefix'),
  longDescription: z
    .string()
    .describe('Extended description for screen-reader users: layout, subjects, relevant text, colours that carry meaning'),
  accessibilityFlags: z.strictObject({
    containsText: z.boolean().describe('Meaningful text is visible and is included in the descriptions'),
    colorConveysMeaning: z.boolean().describe('Some information is carried only by colour (charts, signals, colour-coded labels)'),
    lowContrast: z.boolean().describe('Important content has low contrast against its background'),
    language: z.string().describe('BCP 47 tag of the language the descriptions are written in'),
  }),
});

export const accessibility = defineLens({
  name: 'accessibility',
  reads: ['knownPeople'],
  description:
    'Writes screen-reader alt text (about 125 characters) and a long description following WCAG practice, and flags text in the image, colour-only information and low contrast.',
  category: 'accessibility',
  billable: true,
  version: '1.0.0',
  output,
  prompt: [
    'Write accessible descriptions of the photograph for people who cannot see it.',
    '- altText: about 125 characters, the essential content and purpose first; no "image of" or "photo of"; include short visible text that matters.',
    '- longDescription: 2 to 6 sentences covering the subjects, their arrangement, actions, setting, relevant visible text and any colour that carries meaning.',
    '- Describe people by what is visible (clothing, action, apparent age group); do not guess identity, gender, ethnicity or other sensitive traits. Use a name only when the request data matched it from the caller\'s known people.',
    '- Write in English unless this lens\'s options ask for another language (option `language`, a BCP 47 tag); report the language used in accessibilityFlags.language.',
  ].join('\n'),
  defaultColumns: [
    { label: 'Alt text', jsonPath: 'output.altText', format: 'string' },
    { label: 'Long description', jsonPath: 'output.longDescription', format: 'string' },
  ],
  fixture: {
    altText: 'Grandmother on a sofa holding a present while a boy in red pyjamas unwraps a toy truck beside a Christmas tree',
    longDescription:
      'A living room on Christmas morning. On the left a decorated tree reaches almost to the ceiling. An older woman in a cardigan sits on a sofa holding a wrapped present; a younger man stands behind the sofa, laughing. In the right foreground a small boy in red pyjamas kneels on the carpet, tearing paper off a yellow toy truck. Snow is visible through the window.',
    accessibilityFlags: { containsText: false, colorConveysMeaning: false, lowContrast: false, language: 'en' },
  },
});
