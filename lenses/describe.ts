import { z } from 'zod';
import { defineLens } from './types.ts';

const output = z.strictObject({
  title: z.string().describe('Headline of at most 8 words (IPTC Headline / XMP dc:title)'),
  caption: z.string().describe('One sentence, at most 200 characters (IPTC Caption-Abstract)'),
  description: z.string().describe('One paragraph, 3 to 6 sentences'),
  tags: z.array(z.string()).describe('5 to 25 lower-case keywords, most relevant first, no duplicates (IPTC Keywords)'),
});

export const describe = defineLens({
  name: 'describe',
  reads: ['knownPeople'],
  description: 'General-purpose description: a short title, a one-sentence caption, a paragraph-length description and ranked keyword tags, ready for IPTC/XMP metadata and search.',
  category: 'general',
  billable: true,
  version: '1.0.0',
  output,
  prompt: [
    'Describe the photograph for a photo library.',
    '- title: a headline of at most 8 words. caption: one factual sentence. description: one paragraph of 3 to 6 sentences on the subject, setting, action and notable details.',
    '- tags: 5 to 25 lower-case keywords, most relevant first, covering subject, setting, activity, objects, style and era when evident; no duplicates, no sensitive traits of people.',
    '- State only what is visible or strongly evident; name a person only when the request data\'s known people were matched with evidence, otherwise describe them.',
    '- Write in English unless this lens\'s options ask for another `language`; option `tone` (e.g. neutral, marketing, archival) adjusts the style but never the facts.',
  ].join('\n'),
  defaultColumns: [
    { label: 'Title', jsonPath: 'output.title', format: 'string' },
    { label: 'Caption', jsonPath: 'output.caption', format: 'string' },
    { label: 'Tags', jsonPath: 'output.tags', format: 'tags' },
  ],
  fixture: {
    title: 'Christmas morning in the living room',
    caption: 'A family opens presents beside a decorated Christmas tree while snow falls outside.',
    description:
      'Three generations of a family gather in a 1970s living room on Christmas morning. A grandmother sits on a patterned sofa holding a present while a man laughs behind her. In the foreground a small boy in red pyjamas unwraps a yellow toy truck. A tall decorated tree fills the left of the frame and snow is visible through the window.',
    tags: ['christmas', 'family', 'living room', 'presents', 'christmas tree', '1970s', 'snow', 'child', 'toy truck', 'holiday', 'instant film'],
  },
});
