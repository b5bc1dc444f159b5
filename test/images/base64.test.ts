import { describe, expect, it } from 'vitest';
import { decodeBase64Image } from '../../images/base64.ts';
import { photo } from './photos.ts';

describe('decodeBase64Image', () => {
  const jpeg = photo('Canon_40D.jpg');
  const plain = jpeg.toString('base64');

  it('decodes plain base64 to the exact bytes', () => {
    expect(decodeBase64Image(plain, jpeg.length).equals(jpeg)).toBe(true);
  });

  it('decodes a data:image/...;base64, URI', () => {
    expect(decodeBase64Image(`data:image/jpeg;base64,${plain}`, jpeg.length).equals(jpeg)).toBe(true);
    expect(decodeBase64Image(`DATA:image/JPEG;BASE64,${plain}`, jpeg.length).equals(jpeg)).toBe(true);
  });

  it('accepts MIME line-wrapped, unpadded and URL-safe base64', () => {
    const wrapped = plain.replace(/(.{76})/g, '$1\r\n');
    expect(decodeBase64Image(wrapped, jpeg.length).equals(jpeg)).toBe(true);
    const threeBytes = Buffer.from([0xfb, 0xff, 0xfe]);
    expect(decodeBase64Image('+//+', 3).equals(threeBytes)).toBe(true);
    expect(decodeBase64Image('-__-', 3).equals(threeBytes)).toBe(true);
    expect(decodeBase64Image('QUJD', 3).toString()).toBe('ABC');
    expect(decodeBase64Image('QUI', 2).toString()).toBe('AB');
    expect(decodeBase64Image('QUI=', 2).toString()).toBe('AB');
  });

  it.each([
    ['garbage characters', 'not base64 at all!'],
    ['a stray character mid-stream', `${plain.slice(0, 100)}*${plain.slice(100)}`],
    ['non-ASCII', `${plain.slice(0, 100)}é${plain.slice(100)}`],
    ['padding in the middle', 'QUI=QUJD'],
    ['too much padding', 'QQ==='],
    ['an impossible length', 'QUJDR'],
    ['empty input', ''],
    ['whitespace only', ' \r\n '],
    ['a non-image data URI', `data:text/html;base64,${plain}`],
    ['a data URI without ;base64', `data:image/jpeg,${plain}`],
    ['an empty data URI', 'data:image/png;base64,'],
  ])('rejects %s as VALIDATION_FAILED', (_why, input) => {
    expect(() => decodeBase64Image(input, 1024 * 1024)).toThrow(expect.objectContaining({ code: 'VALIDATION_FAILED', status: 400 }));
  });

  it('rejects an image over the byte cap as IMAGE_TOO_LARGE, exactly at the boundary', () => {
    expect(decodeBase64Image(plain, jpeg.length).length).toBe(jpeg.length);
    expect(() => decodeBase64Image(plain, jpeg.length - 1)).toThrow(
      expect.objectContaining({ code: 'IMAGE_TOO_LARGE', message: expect.stringContaining(`${jpeg.length} bytes`) }),
    );
  });

  // The decoder's fast path (decode, then compare lengths) must refuse exactly what the alphabet
  // and length rules refuse. Seeded, so a failure names an input that fails again.
  it('answers like the alphabet and length rules for 100,000 corrupted strings', () => {
    let seed = 0x5eed;
    const rand = (n: number) => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
      return (seed >>> 8) % n;
    };
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/-_';
    const specials = ['=', '.', '!', ' ', '\n', '\0', 'é', '\xff', '\x7f', '%', '"', '\\', '€', '😀', '\ud800', '\u2028'];
    const rules = (s: string): Buffer | 'invalid' => {
      const body = s.replace(/[\t\n\r ]+/g, '');
      const m = /^[A-Za-z0-9+/_-]*(={0,2})$/.exec(body);
      if (!body || !m || (m[1]!.length > 0 && body.length % 4 !== 0) || body.length % 4 === 1) return 'invalid';
      return Buffer.from(body, 'base64');
    };
    let valid = 0;
    for (let i = 0; i < 100_000; i++) {
      const chars = Array.from({ length: 1 + rand(24) }, () => alphabet[rand(alphabet.length)]!);
      chars.push('='.repeat(rand(3)));
      for (let k = rand(4); k > 0; k--) {
        const c = rand(5) ? specials[rand(specials.length)]! : String.fromCharCode(rand(0x3000));
        if (rand(2)) chars.splice(rand(chars.length + 1), 0, c);
        else chars[rand(chars.length)] = c;
      }
      const input = chars.join('');
      const expected = rules(input);
      let got: Buffer | 'invalid';
      try {
        got = decodeBase64Image(input, 1024);
      } catch (err) {
        expect(err, JSON.stringify(input)).toMatchObject({ code: 'VALIDATION_FAILED' });
        got = 'invalid';
      }
      if (expected === 'invalid') expect(got, JSON.stringify(input)).toBe('invalid');
      else {
        valid++;
        expect(got === 'invalid' ? 'invalid' : got.toString('hex'), JSON.stringify(input)).toBe(expected.toString('hex'));
      }
    }
    expect(valid).toBeGreaterThan(10_000);
  });
});
