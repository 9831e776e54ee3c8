import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ERRORS, REASONS } from '../src/errors.js';

const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');

describe('README documents the error catalogue', () => {
  it.each(Object.entries(ERRORS))('code %s appears with its status and message', (code, { status, message }) => {
    expect(readme).toMatch(new RegExp(`\\| ${status} \\| ${code} \\| ${message} \\|`));
  });
  it.each(Object.keys(REASONS))('reason %s is listed', (reason) => {
    expect(readme).toContain(`| \`${reason}\` |`);
  });
  it('lists every KEYGATE_ environment variable the code reads', () => {
    const src = ['src/config/load-config.ts', 'src/config/redis-settings.ts', 'src/cli/serve-command.ts', 'src/cli/keys-command.ts']
      .map((f) => readFileSync(new URL(`../${f}`, import.meta.url), 'utf8'))
      .join('\n');
    const names = new Set([...src.matchAll(/KEYGATE_[A-Z_]+/g)].map((m) => m[0]));
    for (const name of names) expect(readme, name).toContain(name);
  });
});
