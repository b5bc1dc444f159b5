import { z } from 'zod';

/**
 * Shared zod building blocks for lens outputs. Every object is strict, every property required,
 * unknowns are `null`: the same schema then works as OpenAI strict output, an Anthropic tool
 * input_schema and a Gemini responseJsonSchema.
 */

/** A calibrated probability that an AI guess is right. */
export const confidence = () =>
  z.number().min(0).max(1).describe('Calibrated probability 0..1 that this estimate is correct');

/** A 0..1 quality/likelihood score (not a confidence). */
export const unitScore = (what: string) => z.number().min(0).max(1).describe(what);

/** sRGB colour. Case-insensitive on input so a model writing #A1B2C3 is not a vendor failure. */
export const hexColor = () =>
  z
    .string()
    .regex(/^#[0-9a-fA-F]{6}$/)
    .describe('sRGB colour as #rrggbb');

/** Calendar year a photograph can plausibly carry (photography starts in the 1820s). */
export const photoYear = () => z.int().min(1820).max(2100);

/** Axis-aligned box in fractions of the image size, origin top-left; null when not localisable. */
export const boundingBox = () =>
  z
    .strictObject({
      x: z.number().min(0).max(1),
      y: z.number().min(0).max(1),
      width: z.number().min(0).max(1),
      height: z.number().min(0).max(1),
    })
    .nullable()
    .describe('Box as fractions of image width/height from the top-left corner; null if unsure');

export const severity = () => z.enum(['minor', 'moderate', 'severe']);
