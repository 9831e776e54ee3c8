/**
 * Free text a tenant or an operator gives a key (a label, a revoke or rotate reason) ends up in an
 * operator's terminal (`keygate keys list`), in logs and in the console. Characters that move the
 * cursor, rewrite a line or reorder it are refused on the way in and escaped on the way out:
 * C0 controls (ESC, CR, LF, BEL, TAB…), DEL, C1 controls (U+0080–U+009F, CSI among them) and the
 * bidi embeddings, overrides and isolates (U+202A–U+202E, U+2066–U+2069).
 */
// eslint-disable-next-line no-control-regex -- matching control characters is this module's purpose
const UNPRINTABLE = /[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/;
const UNPRINTABLE_ALL = new RegExp(UNPRINTABLE.source, 'g');

export const PRINTABLE_RULE =
  'must not contain control characters (C0, DEL, C1) or bidi overrides (U+202A to U+202E, U+2066 to U+2069)';

/** True when `text` holds a character the rule refuses. */
export const hasUnprintable = (text: string): boolean => UNPRINTABLE.test(text);

/** `\uXXXX` for each refused character: what a terminal shows instead of obeying it (also valid inside JSON strings). */
export const escapeUnprintable = (text: string): string =>
  text.replace(UNPRINTABLE_ALL, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
