// @ts-check
// `node --import <this file> <script>` with RECORD_MODULES_FILE=<file>: every module the process loads is
// appended to <file>, one URL or path a line. ES modules are seen by a resolve hook registered through
// node:module register(); CommonJS modules required from CommonJS (a package's own files) are added from the
// require cache when the process exits. The light-commands test and `npm run bench:cli` read it: which
// packages a command loads does not depend on how busy the machine is, its start time does.
import { appendFileSync } from 'node:fs';
import { createRequire, register } from 'node:module';

const file = process.env.RECORD_MODULES_FILE;
if (file) {
  register('./record-modules-hooks.mjs', import.meta.url, { data: { file } });
  const require = createRequire(import.meta.url);
  process.on('exit', () => {
    const cached = Object.keys(require.cache);
    if (cached.length > 0) appendFileSync(file, `${cached.join('\n')}\n`);
  });
}

/** The packages these modules came from (`ioredis`, `@ioredis/commands`), each once, from paths or file URLs. */
/** @param {readonly string[]} modules @returns {string[]} */
export function packagesOf(modules) {
  const names = new Set();
  for (const m of modules) {
    const match = /\/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(m);
    if (match?.[1]) names.add(match[1]);
  }
  return [...names].sort();
}
