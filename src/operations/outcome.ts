// Tested in test/unit/key-operations.test.ts, test/e2e/owner-limits.test.ts, test/e2e/management-api.test.ts.

/** Why an operation did nothing: data, so the CLI prints it and the API renders it (404, 400, 409). */
export type Refusal =
  | { readonly ok: false; readonly refused: 'not_found' }
  | { readonly ok: false; readonly refused: 'invalid'; readonly problems: readonly string[] }
  | { readonly ok: false; readonly refused: 'conflict'; readonly message: string; readonly version?: number };

/**
 * What a key or owner operation answers: its value, or the refusal that says why it did nothing. `warnings`: what
 * an operation that did its work could not do beside it (a key's home moved, its credits balance not carried),
 * for the CLI's stderr and the API's answer.
 */
export type Done<T> = { readonly ok: true; readonly value: T; readonly warnings?: readonly string[] } | Refusal;

export const done = <T>(value: T): Done<T> => ({ ok: true, value });
export const notFound: Refusal = Object.freeze({ ok: false, refused: 'not_found' });
export const invalid = (problems: readonly string[]): Refusal => ({ ok: false, refused: 'invalid', problems });
export const conflict = (message: string, version?: number): Refusal => ({
  ok: false,
  refused: 'conflict',
  message,
  ...(version !== undefined && { version }),
});
