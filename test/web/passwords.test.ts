import { describe, expect, it } from 'vitest';
import { hashPassword, passwordProblem, verifyPassword } from '../../web/passwords.ts';

describe('console password rules (NIST SP 800-63B-4)', () => {
  it.each([
    ['too short', 'fourteen chars', 'at least 15'],
    ['a common password', 'passwordpassword', 'commonly used'],
    ['one character repeated', 'aaaaaaaaaaaaaaaaaaa', 'Repeated'],
    ['a word repeated', 'hellohellohellohello', 'Repeated'],
    ['an alphabet run', 'abcdefghijklmnopq', 'Sequences'],
    ['a keyboard row', 'qwertyuiopasdfghj', 'Sequences'],
    ['digits counting down', '98765432109876543', 'Sequences'],
    ['the address and a year', 'ada.lovelace@example.com1815', 'e-mail address'],
    ['the service name', 'lenstack-lenstack-2026', 'service name'],
    ['over 128 characters', 'x'.repeat(60) + ' y'.repeat(40), 'at most 128'],
  ])('refuses %s', (_why, password, words) => {
    expect(passwordProblem(password, { email: 'ada.lovelace@example.com' })).toContain(words);
  });

  it.each([['four random words', 'lantern orbit cactus violin'], ['no composition rules: all lowercase', 'mybicyclehasthreewheels'], ['any characters', 'ça marche très bien, 🙂 oui']])(
    'accepts %s',
    (_why, password) => {
      expect(passwordProblem(password, { email: 'ada.lovelace@example.com' })).toBeNull();
    },
  );

  it('stores argon2id with the OWASP parameters and verifies only the right password', async () => {
    const hash = await hashPassword('lantern orbit cactus violin');
    expect(hash).toMatch(/^\$argon2id\$v=19\$m=19456,t=2,p=1\$/);
    expect(await verifyPassword(hash, 'lantern orbit cactus violin')).toBe(true);
    expect(await verifyPassword(hash, 'lantern orbit cactus violiN')).toBe(false);
    expect(await verifyPassword('not a hash', 'x')).toBe(false);
  });
});
