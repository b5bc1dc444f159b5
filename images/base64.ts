import { imageTooLarge, validationFailed } from '../core/errors.ts';

/**
 * Decodes an `imageBase64` request field: plain base64 (standard or URL-safe alphabet) or a
 * `data:image/<type>;base64,` URI. Node's decoder silently skips bad characters, so we validate
 * first, and we size-check from the length before allocating the decoded buffer.
 */

const DATA_URI_PREFIX = /^data:image\/[a-z0-9.+-]+;base64,/i;
// Line breaks and spaces from MIME-style wrapping are tolerated and dropped.
const WHITESPACE = /[\t\n\r ]+/g;
const ALPHABET = /^[A-Za-z0-9+/_-]*(={0,2})$/;

export function decodeBase64Image(s: string, maxBytes: number): Buffer {
  let body = s;
  if (/^data:/i.test(s.slice(0, 5))) {
    const prefix = DATA_URI_PREFIX.exec(s.slice(0, 256));
    if (!prefix) throw validationFailed('imageBase64 data URI must look like data:image/<type>;base64,<data>');
    body = s.slice(prefix[0].length);
  }
  if (body.length === 0) throw validationFailed('imageBase64 is empty');
  const strict = decodeStrict(body, maxBytes);
  if (strict) return strict;

  if (/[\t\n\r ]/.test(body)) body = body.replace(WHITESPACE, '');
  if (body.length === 0) throw validationFailed('imageBase64 is empty');

  const match = ALPHABET.exec(body);
  if (!match) throw validationFailed('imageBase64 contains characters outside the base64 alphabet');
  const padding = match[1]!.length;
  if ((padding > 0 && body.length % 4 !== 0) || body.length % 4 === 1) {
    throw validationFailed('imageBase64 has an impossible length for base64 data');
  }

  const decodedLength = Math.floor(((body.length - padding) * 3) / 4);
  if (decodedLength > maxBytes) throw imageTooLarge(`Image is ${decodedLength} bytes, over the ${maxBytes}-byte limit`);
  return Buffer.from(body, 'base64');
}

/** Any UTF-16 code unit above 0xff: instant on V8's one-byte strings, the case of all real base64. */
const NON_LATIN1 = /[^\x00-\xff]/;

/**
 * The common case without scanning the text twice: decode, then check the decoded length against
 * the length the text implies. Node's decoder skips every byte outside the alphabet (and stops at
 * an inner '='), so any such byte makes the buffer shorter; whitespace does too, and then the
 * careful path above strips it. Null means "take the careful path", never "invalid".
 * test/images/base64.test.ts holds both paths to the same answers.
 */
function decodeStrict(body: string, maxBytes: number): Buffer | null {
  if (NON_LATIN1.test(body)) return null;
  let padding = 0;
  while (padding < 3 && body.charCodeAt(body.length - 1 - padding) === 0x3d) padding++;
  if (padding > 2 || body.length % 4 === 1 || (padding > 0 && body.length % 4 !== 0)) return null;
  const expected = Math.floor(((body.length - padding) * 3) / 4);
  if (expected > maxBytes) return null;
  const bytes = Buffer.from(body, 'base64');
  return bytes.length === expected ? bytes : null;
}
