// @ts-check
// `npm start` and `npm run demo` run this first (their "pre" scripts): it compiles src/ into dist/ only when
// dist/ is not current, so a start on a built tree (npm ci builds, through "prepare") does not spend
// 10-18 s in tsc. Current = every src/**/*.ts has its dist/**/*.js, no older than it, and no tsconfig is
// newer than the build. Otherwise one line says which file is newer, then it rebuilds (npm run build).
import { existsSync, readdirSync, statSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository root. */
const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');

/** The settings a build depends on besides src/ (a change there may change every output). */
const BUILD_SETTINGS = ['tsconfig.json', 'tsconfig.build.json'];

/**
 * Why dist/ is not current under `root`: the first source (or setting) newer than its output, or whose
 * output is missing; undefined when dist/ is current.
 * @param {string} root
 * @returns {string | undefined}
 */
export function staleReason(root) {
  const src = join(root, 'src');
  const entry = join(root, 'dist', 'index.js');
  if (!existsSync(entry)) return 'dist/ has not been built';
  const builtAt = statSync(entry).mtimeMs;
  for (const name of BUILD_SETTINGS) {
    const path = join(root, name);
    if (existsSync(path) && statSync(path).mtimeMs > builtAt) return `${name} is newer than dist/`;
  }
  /** @param {string} dir @returns {string | undefined} */
  const walk = (dir) => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, e.name);
      if (e.isDirectory()) {
        const found = walk(path);
        if (found) return found;
        continue;
      }
      if (!e.name.endsWith('.ts') || e.name.endsWith('.d.ts')) continue;
      const out = join(root, 'dist', relative(src, path)).replace(/\.ts$/, '.js');
      if (!existsSync(out)) return `dist/ has no build of src/${relative(src, path)}`;
      if (statSync(path).mtimeMs > statSync(out).mtimeMs) return `src/${relative(src, path)} is newer than dist/`;
    }
    return undefined;
  };
  return walk(src);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const reason = staleReason(ROOT);
  if (reason === undefined) process.exit(0);
  let tsc;
  try {
    tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  } catch {
    process.stderr.write(
      `keygate: ${reason}, and TypeScript is not installed here: run npm ci (it builds), then start again\n`,
    );
    process.exit(1);
  }
  process.stderr.write(`keygate: ${reason}: rebuilding (npm run build)\n`);
  const built = spawnSync(process.execPath, [tsc, '-p', join(ROOT, 'tsconfig.build.json')], { stdio: 'inherit' });
  process.exit(built.status ?? 1);
}
