import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ERRORS, REASONS } from '../src/errors.js';
import { envNamesInCode } from './helpers/deploy.js';

const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');

describe('README documents the error catalogue', () => {
  it.each(Object.entries(ERRORS))('code %s appears with its status and message', (code, { status, message }) => {
    expect(readme).toMatch(new RegExp(`\\| ${status} \\| ${code} \\| ${message} \\|`));
  });
  it.each(Object.keys(REASONS))('reason %s is listed', (reason) => {
    expect(readme).toContain(`| \`${reason}\` |`);
  });
  it('lists every KEYGATE_ environment variable the code reads', () => {
    for (const name of envNamesInCode()) expect(readme, name).toContain(`\`${name}\``);
  });
});
