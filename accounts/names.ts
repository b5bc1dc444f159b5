/**
 * Names people type (their display name, a workspace's name) end up in other people's mail and
 * pages. They are bounded where they come in, and neutralised again where they go into mail
 * (rows written before the bounds existed, or by other doors, may still hold anything).
 */
export const NAME_MAX = 80;

/** Line breaks, tabs, other control and format characters (bidi overrides, zero-width joiners…). */
const UNPRINTABLE = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/u;

/** Why a name is refused, or null when it is fine (a display name may be empty). */
export function nameProblem(name: string, what: string): string | null {
  if ([...name].length > NAME_MAX) return `${what}: at most ${NAME_MAX} characters`;
  if (UNPRINTABLE.test(name)) return `${what}: no line breaks, tabs or other control characters`;
  return null;
}

/**
 * A person-chosen name as it may stand in a mail's text: printable characters only, spaces
 * collapsed, at most NAME_MAX characters, and nothing a mail program turns into a link — `://` and
 * the dots of anything shaped like a host name (`evil.example`, `www.x.io/path`) are broken with
 * `[.]`, the usual way of quoting an address without making it one. `@` likewise (`a[@]b`).
 */
export function mailSafe(text: string): string {
  let s = text.replace(new RegExp(UNPRINTABLE.source, 'gu'), ' ').replace(/\s+/gu, ' ').trim();
  const chars = [...s];
  if (chars.length > NAME_MAX) s = `${chars.slice(0, NAME_MAX - 1).join('')}…`;
  return s
    .replace(/:\/\//g, '[:]//')
    .replace(/([\p{L}\p{N}_-])\.(?=[\p{L}\p{N}_-])/gu, '$1[.]')
    .replace(/@/g, '[@]');
}
