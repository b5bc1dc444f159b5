import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import sharp from 'sharp';
import { z } from 'zod';

/** Shared by test/vendors and the simulator tests (test/tools/sim-*): real photos, a demanding schema, an independent validator. */

const PHOTOS_DIR = fileURLToPath(new URL('../fixtures/photos/', import.meta.url));
export const photo = (name: string): Buffer => readFileSync(PHOTOS_DIR + name);

/** A lens-like schema from zod (as lenses/ produce them): nested objects, arrays, enums, nullables, pattern, date. */
export function lensLikeSchema(): Record<string, unknown> {
  return z.toJSONSchema(
    z.strictObject({
      summary: z.string().min(10).max(200),
      scene: z.strictObject({
        kind: z.enum(['indoor', 'outdoor', 'studio', 'unknown']),
        lighting: z.enum(['daylight', 'artificial', 'mixed']).nullable(),
        peopleCount: z.int().min(0).max(50),
      }),
      palette: z
        .array(z.strictObject({ hex: z.string().regex(/^#[0-9a-fA-F]{6}$/), share: z.number().min(0).max(1) }))
        .min(1)
        .max(5),
      takenOn: z.iso.date().nullable(),
      year: z.int().min(1820).max(2100).nullable(),
      tags: z.array(z.string().min(1).max(30)).max(8),
      version: z.literal('v1'),
      box: z
        .strictObject({ x: z.number().min(0).max(1), y: z.number().min(0).max(1), width: z.number().min(0).max(1), height: z.number().min(0).max(1) })
        .nullable(),
    }),
  ) as Record<string, unknown>;
}

/** Hand-written: nullables as `type: [.., 'null']` and as `anyOf`, arrays of objects of arrays. */
export const HAND_SCHEMA: Record<string, unknown> = {
  type: 'object',
  properties: {
    caption: { type: ['string', 'null'] },
    condition: { anyOf: [{ type: 'string', enum: ['mint', 'good', 'worn', 'damaged'] }, { type: 'null' }] },
    objects: {
      type: 'array',
      minItems: 2,
      maxItems: 4,
      items: {
        type: 'object',
        properties: {
          name: { type: 'string' },
          confidence: { type: 'number', minimum: 0, maximum: 1 },
          attributes: { type: 'array', items: { type: 'string', enum: ['red', 'large', 'old', 'shiny'] }, maxItems: 3 },
        },
        required: ['name', 'confidence', 'attributes'],
        additionalProperties: false,
      },
    },
    location: {
      type: 'object',
      properties: {
        country: { type: ['string', 'null'] },
        latitude: { type: ['number', 'null'], minimum: -90, maximum: 90 },
      },
      required: ['country', 'latitude'],
      additionalProperties: false,
    },
  },
  required: ['caption', 'condition', 'objects', 'location'],
  additionalProperties: false,
};

// An independent validator (not vendors/output-schema.ts), so the tests do not grade their own homework.
const addFormats = addFormatsModule as unknown as typeof addFormatsModule.default;
const ajv = new Ajv2020({ allErrors: true, strict: false });
addFormats(ajv);

export function conforms(schema: Record<string, unknown>, value: unknown): { ok: boolean; errors: string } {
  const validate = ajv.compile(schema);
  const ok = validate(value);
  return { ok, errors: ok ? '' : ajv.errorsText(validate.errors) };
}

/** A synthetic JPEG of the given size; `shade` makes distinct images with distinct bytes. */
export async function syntheticJpeg(width: number, height: number, shade = 0): Promise<Buffer> {
  return sharp({
    create: { width, height, channels: 3, background: { r: (40 + shade * 37) % 256, g: (90 + shade * 11) % 256, b: 160 } },
  })
    .jpeg({ quality: 90 })
    .toBuffer();
}
