/**
 * Text as metadata can hold it: C0 controls (CR, LF and NUL among them), DEL and the XML
 * non-characters U+FFFE/U+FFFF become a space, lone surrogates become U+FFFD. Everything else
 * is kept exactly, so a value like "-all=" or "| -o /tmp/x" is stored as that text.
 */
const UNWRITABLE = /[\u0000-\u001f\u007f\ufffe\uffff]/g;
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

export function writableText(s: string): string {
  return s.replace(LONE_SURROGATE, '\ufffd').replace(UNWRITABLE, ' ');
}

/** The longest prefix of `s` whose UTF-8 encoding fits in `maxBytes`, cut on a code point. */
export function truncateUtf8(s: string, maxBytes: number): string {
  if (Buffer.byteLength(s, 'utf8') <= maxBytes) return s;
  let bytes = 0;
  let out = '';
  for (const ch of s) {
    const n = Buffer.byteLength(ch, 'utf8');
    if (bytes + n > maxBytes) break;
    bytes += n;
    out += ch;
  }
  return out;
}
