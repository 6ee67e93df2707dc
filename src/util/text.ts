/**
 * Text is counted and cut in Unicode code points (decisions 7.2 "Text"): a cut in UTF-16 units can split an emoji's
 * surrogate pair, and a lone surrogate is not valid UTF-8 and not valid JSON for PostgreSQL (a reply of emoji text
 * once answered 500 on PGlite because of it). Every place that shortens stored text goes through here.
 */

/** The number of code points of `text`. */
export function codePointLength(text: string): number {
  let count = 0;
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i);
    // A high surrogate followed by a low one is one code point.
    if (unit >= 0xd800 && unit <= 0xdbff && i + 1 < text.length) {
      const next = text.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) i++;
    }
    count++;
  }
  return count;
}

/** `text` cut to at most `max` code points, never inside a character; `ellipsis` ends a cut text (and counts). */
export function cutText(text: string, max: number, ellipsis = ''): string {
  if (text.length <= max) return text;
  if (codePointLength(text) <= max) return text;
  const keep = Math.max(0, max - codePointLength(ellipsis));
  let end = 0;
  for (let n = 0; n < keep && end < text.length; n++) {
    const unit = text.charCodeAt(end);
    end += unit >= 0xd800 && unit <= 0xdbff && end + 1 < text.length && (text.charCodeAt(end + 1) & 0xfc00) === 0xdc00 ? 2 : 1;
  }
  return `${text.slice(0, end)}${ellipsis}`;
}
