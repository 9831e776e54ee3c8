import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ERRORS, REASONS } from '../../src/errors.js';
import { envNamesInCode } from '../helpers/deploy.js';

const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');

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

describe('README "Behind your proxy" recipes are the files the tests run', () => {
  const snippets = [...readme.matchAll(/<!-- snippet: (\S+) -->\n```[a-z]*\n([\s\S]*?)\n```/g)].map((m) => ({ file: m[1] as string, block: m[2] as string }));
  it('has the nginx, ingress-nginx, Traefik and Envoy recipes', () => {
    expect(snippets.map((s) => s.file).sort()).toEqual(['deploy/envoy/forward-auth.yaml', 'deploy/kubernetes/forward-auth/ingress.yaml', 'deploy/nginx/forward-auth.conf', 'deploy/traefik/forward-auth.yaml']);
  });
  it.each(snippets.map((s) => [s.file, s] as const))('%s: the README block is the file, or a contiguous run of its lines (re-indented as a whole)', (_name, { file, block }) => {
    const lines = readFileSync(new URL(`../../${file}`, import.meta.url), 'utf8').trimEnd().split('\n');
    const want = block.split('\n');
    const found = lines.some((_, start) => {
      const indent = lines[start]!.length - lines[start]!.trimStart().length - (want[0]!.length - want[0]!.trimStart().length);
      if (indent < 0) return false;
      return want.every((w, i) => {
        const got = lines[start + i];
        return got !== undefined && (w === '' ? got.trim() === '' : got === ' '.repeat(indent) + w);
      });
    });
    expect(found, `${file} does not contain the README block`).toBe(true);
  });
});
