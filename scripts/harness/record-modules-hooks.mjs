// @ts-check
// The module loader hooks record-modules.mjs registers: they run on the loader's own thread and append every
// resolved URL to the file named in `data`.
import { appendFileSync } from 'node:fs';

/** @type {string | undefined} */
let file;

/** @param {{ file: string }} data */
export function initialize(data) {
  file = data.file;
}

/**
 * @param {string} specifier
 * @param {unknown} context
 * @param {(specifier: string, context: unknown) => Promise<{ url: string }>} nextResolve
 */
export async function resolve(specifier, context, nextResolve) {
  const result = await nextResolve(specifier, context);
  if (file) appendFileSync(file, `${result.url}\n`);
  return result;
}
