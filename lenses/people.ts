import { z } from 'zod';
import { boundingBox, confidence } from './fields.ts';
import { defineLens } from './types.ts';

const output = z.strictObject({
  peopleCount: z.strictObject({
    total: z.int().min(0).describe('People visible, including partial and background figures'),
    prominent: z.int().min(0).describe('People who are a subject of the photo, not background'),
    isEstimate: z.boolean().describe('True for crowds where the total is an estimate'),
  }),
  people: z
    .array(
      z.strictObject({
        index: z.int().min(0).describe('0-based, left to right among prominent people'),
        position: z.string().describe('Where in the frame, e.g. "left foreground"'),
        boundingBox: boundingBox(),
        apparentAgeRange: z
          .strictObject({ min: z.int().min(0).max(120), max: z.int().min(0).max(120) })
          .nullable()
          .describe('Apparent age range; null when the person is too small or turned away'),
        expression: z.enum(['smiling', 'laughing', 'neutral', 'serious', 'sad', 'surprised', 'angry', 'not-visible']),
        faceVisible: z.boolean(),
        lookingAtCamera: z.boolean(),
        pose: z.enum(['standing', 'sitting', 'lying', 'walking', 'running', 'kneeling', 'other']),
        clothing: z.string().describe('Short description of clothing and accessories'),
        activity: z.string().nullable(),
      }),
    )
    .describe('Prominent people only (at most 20)'),
  knownPeopleMatches: z
    .array(
      z.strictObject({
        name: z.string().describe('Exactly as given in the caller\'s knownPeople list'),
        personIndex: z.int().min(0).describe('Index into people'),
        confidence: confidence(),
        evidence: z.string().describe('Why: visible name tag, caption, consistent age and role, resemblance across photos'),
      }),
    )
    .describe('Only names from the supplied knownPeople list; empty when none was supplied'),
  groupContext: z.strictObject({
    type: z.enum(['none', 'individual', 'couple', 'family', 'friends', 'colleagues', 'team', 'class', 'crowd', 'audience', 'other']),
    occasion: z.string().nullable().describe('e.g. wedding, graduation, picnic; null if not evident'),
    description: z.string(),
  }),
});

export const people = defineLens({
  name: 'people',
  reads: ['knownPeople'],
  description:
    'Counts people and describes each prominent person (position, apparent age range, expression, pose, clothing), matches them against caller-supplied known people, and describes the group and occasion. Never identifies anyone by face alone.',
  category: 'people',
  billable: true,
  version: '1.0.0',
  output,
  prompt: [
    'Describe the people in the photograph.',
    '- peopleCount.total counts everyone visible; set isEstimate for crowds.',
    '- people: one entry per prominent person, left to right, at most 20. Apparent age is a range, never a single number; use null when the face is too small or hidden.',
    '- Do not infer gender, ethnicity, religion, health, sexual orientation or any other sensitive trait; describe only what is visible (clothing, pose, expression, activity).',
    '- knownPeopleMatches: you may only use names from the known-people list in the request data. Match a person only with supporting evidence (a caption or name tag, a role that fits, an apparent age that fits the birth year and the photo date). Never name anyone who is not on that list, including public figures. When unsure, leave them unmatched.',
    '- groupContext: the kind of group and the occasion, if evident.',
  ].join('\n'),
  defaultColumns: [
    { label: 'People', jsonPath: 'output.peopleCount.total', format: 'number' },
    { label: 'Known people', jsonPath: 'output.knownPeopleMatches.*.name', format: 'tags' },
    { label: 'Group', jsonPath: 'output.groupContext.type', format: 'string' },
    { label: 'Occasion', jsonPath: 'output.groupContext.occasion', format: 'string' },
  ],
  fixture: {
    peopleCount: { total: 3, prominent: 3, isEstimate: false },
    people: [
      {
        index: 0,
        position: 'left, seated on the sofa',
        boundingBox: { x: 0.08, y: 0.3, width: 0.25, height: 0.6 },
        apparentAgeRange: { min: 60, max: 75 },
        expression: 'smiling',
        faceVisible: true,
        lookingAtCamera: true,
        pose: 'sitting',
        clothing: 'Knitted cardigan over a floral dress, reading glasses',
        activity: 'Holding a wrapped present',
      },
      {
        index: 1,
        position: 'centre, standing behind the sofa',
        boundingBox: { x: 0.38, y: 0.12, width: 0.24, height: 0.8 },
        apparentAgeRange: { min: 30, max: 40 },
        expression: 'laughing',
        faceVisible: true,
        lookingAtCamera: false,
        pose: 'standing',
        clothing: 'Striped sweater with a wide collar',
        activity: null,
      },
      {
        index: 2,
        position: 'right foreground, on the floor',
        boundingBox: { x: 0.68, y: 0.5, width: 0.2, height: 0.45 },
        apparentAgeRange: { min: 5, max: 8 },
        expression: 'surprised',
        faceVisible: true,
        lookingAtCamera: true,
        pose: 'kneeling',
        clothing: 'Red pyjamas',
        activity: 'Unwrapping a toy truck',
      },
    ],
    knownPeopleMatches: [
      {
        name: 'Margaret Ellis',
        personIndex: 0,
        confidence: 0.74,
        evidence: 'Apparent age fits a 1911 birth year for a photo dated around 1978, and the caller lists her as the grandmother; no other person fits that role.',
      },
    ],
    groupContext: { type: 'family', occasion: 'Christmas morning', description: 'Three generations of a family opening presents in a living room.' },
  },
});
