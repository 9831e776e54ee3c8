import { existsSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ERRORS, REASONS } from '../../src/errors.js';
import { envNamesInCode, repoRoot } from '../helpers/deploy.js';
import { codeSpans, docFiles, headingAnchors, links, readDoc, section, tableRows } from '../helpers/markdown.js';

const errorsDoc = readDoc('docs/reference/errors.md');
const configDoc = readDoc('docs/reference/configuration.md');

describe('docs/reference/errors.md documents the error catalogue', () => {
  it.each(Object.entries(ERRORS))('code %s appears with its status and message', (code, { status, message }) => {
    expect(errorsDoc).toMatch(new RegExp(`\\| ${status} \\| ${code} \\| ${message} \\|`));
  });
  it.each(Object.keys(REASONS))('reason %s is listed', (reason) => {
    expect(errorsDoc).toContain(`| \`${reason}\` |`);
  });

  // The other direction: a row for a code or reason the code no longer has is a promise Keygate does not keep.
  it('has a row for no code the catalogue lacks, and one row per code', () => {
    const codes = tableRows(section(errorsDoc, 'Error codes'))
      .filter((cells) => /^\d{3}$/.test(cells[0]!))
      .map((cells) => cells[1]);
    expect(codes.sort()).toEqual(Object.keys(ERRORS).sort());
  });
  it('has a row for no reason the catalogue lacks, and one row per reason', () => {
    const reasons = tableRows(section(errorsDoc, 'Rejection reasons'))
      .filter((cells) => /^`\w+`$/.test(cells[0]!))
      .map((cells) => codeSpans(cells[0]!)[0]);
    expect(reasons.sort()).toEqual(Object.keys(REASONS).sort());
  });
});

describe('docs/reference/configuration.md documents the environment', () => {
  it('lists every KEYGATE_ environment variable the code reads', () => {
    for (const name of envNamesInCode()) expect(configDoc, name).toContain(`\`${name}\``);
  });
  it('has a variable row only for names the code reads', () => {
    const rows = tableRows(section(configDoc, 'Environment variables')).filter((cells) =>
      cells[0]!.startsWith('`KEYGATE_'),
    );
    const documented = rows.flatMap((cells) => codeSpans(cells[0]!));
    expect(documented.length).toBeGreaterThan(30);
    const known = envNamesInCode();
    expect(documented.filter((name) => !known.has(name))).toEqual([]);
  });
  it.each(docFiles())('%s names no KEYGATE_ variable the code does not read', (file) => {
    const known = envNamesInCode();
    const unknown = [...readDoc(file).matchAll(/KEYGATE_[A-Z0-9_]*[A-Z0-9]/g)]
      .map((m) => m[0])
      .filter((name) => !known.has(name));
    expect([...new Set(unknown)]).toEqual([]);
  });
});

/** The forward-auth recipes: every file under these folders is one an operator runs as it is, placeholders filled in. */
const RECIPE_DIRS = [
  'deploy/nginx',
  'deploy/caddy',
  'deploy/traefik',
  'deploy/envoy',
  'deploy/kubernetes/forward-auth',
];
const PROXY_PAGE = 'docs/behind-your-proxy.md';

describe(`${PROXY_PAGE} links to the recipe files the tests run, instead of copying them`, () => {
  const recipes = RECIPE_DIRS.flatMap((dir) =>
    readdirSync(join(repoRoot, dir), { recursive: true, withFileTypes: true })
      .filter((d) => d.isFile())
      .map((d) => relative(repoRoot, join(d.parentPath, d.name))),
  ).sort();
  const linked = links(readDoc(PROXY_PAGE)).map(({ target }) => {
    const path = target.split('#')[0]!;
    return normalize(join(dirname(PROXY_PAGE), decodeURI(path)));
  });

  it('finds the nginx, ingress-nginx, Traefik, Envoy and Caddy recipes', () => {
    expect(recipes).toEqual(
      expect.arrayContaining([
        'deploy/caddy/Caddyfile',
        'deploy/envoy/forward-auth.yaml',
        'deploy/kubernetes/forward-auth/ingress.yaml',
        'deploy/nginx/forward-auth.conf',
        'deploy/traefik/forward-auth.yaml',
      ]),
    );
  });
  it.each(recipes)('links to %s', (file) => {
    expect(linked).toContain(file);
  });
  it('every link into deploy/ resolves', () => {
    const intoDeploy = linked.filter((path) => path.startsWith('deploy/'));
    expect(intoDeploy.length).toBeGreaterThanOrEqual(recipes.length);
    for (const path of intoDeploy) expect(existsSync(join(repoRoot, path)), path).toBe(true);
  });
  // A copy drifts from the file the tests run; the page explains and links, the file is the one source.
  it.each(docFiles())('%s copies no deploy file (no snippet blocks)', (doc) => {
    expect(readDoc(doc)).not.toMatch(/<!-- snippet:/);
  });
});

/**
 * Written on other branches of the same change (issue 33: the request lifecycle moves out of the README). A link to one of them is accepted only while the file
 * is missing; once it exists, the test below fails so that this list is emptied and the links are checked like any other.
 */
const PENDING = new Set<string>([]);

describe('links between the docs resolve', () => {
  const local = [...docFiles(), 'DEVELOPERS.md', 'CHANGELOG.md', 'UPGRADING.md'].flatMap((file) =>
    links(readDoc(file))
      .filter(({ target }) => !/^[a-z][a-z0-9+.-]*:/i.test(target))
      .map(({ target, line }) => {
        const [path = '', anchor] = target.split('#');
        const resolved = path === '' ? file : normalize(join(dirname(file), decodeURI(path)));
        return { where: `${file}:${line}`, target, resolved, anchor };
      }),
  );

  it('finds the links (the parser reads the docs)', () => {
    expect(local.length).toBeGreaterThan(100);
  });
  it('README links first to the contract, inside the repository', () => {
    expect(local.find((l) => l.where.startsWith('README.md:'))?.resolved).toBe('docs/contract.md');
  });
  it.each(local.map((l) => [`${l.where} ${l.target}`, l] as const))('%s', (_name, { resolved, anchor }) => {
    expect(relative(repoRoot, join(repoRoot, resolved)).startsWith('..'), 'points outside the repository').toBe(false);
    if (PENDING.has(resolved) && !existsSync(join(repoRoot, resolved))) return;
    expect(existsSync(join(repoRoot, resolved)), `${resolved} exists`).toBe(true);
    if (anchor === undefined) return;
    expect(
      resolved.endsWith('.md') && statSync(join(repoRoot, resolved)).isFile(),
      'an anchor points into a markdown file',
    ).toBe(true);
    expect([...headingAnchors(readDoc(resolved))], `#${anchor} is a heading of ${resolved}`).toContain(anchor);
  });
  it.each([...PENDING])('%s is still pending (once it exists, remove it from PENDING)', (file) => {
    expect(existsSync(join(repoRoot, file))).toBe(false);
  });
});

/**
 * The shipped config files point operators at the docs in comments and descriptions. Those pointers are
 * repository paths (`docs/running.md#overload`), checked like links: a section that moves breaks the
 * test, not the operator's afternoon. A pointer by section name into the README ("README \"Metrics\"")
 * is checked too, so the old form cannot come back unnoticed.
 */
describe('pointers from the shipped config files into the docs resolve', () => {
  const FILES = [
    'config/routes.yaml',
    'docker-compose.yml',
    'deploy/prometheus/alerts.yml',
    'deploy/grafana/keygate-dashboard.json',
  ];
  const readmeSections = new Set(
    readDoc('README.md')
      .split('\n')
      .filter((l) => /^#{1,6} /.test(l))
      .map((l) => l.replace(/^#+ /, '')),
  );
  const pointers = (file: string) =>
    [...readDoc(file).matchAll(/\b((?:docs\/[\w./-]+|README)\.md)(?:#([\w-]+))?/g)].map((m) => ({
      path: m[1]!,
      anchor: m[2],
    }));
  it.each(FILES)('%s points into the docs at least once', (file) => {
    expect(pointers(file).length).toBeGreaterThan(0);
  });
  it.each(FILES)('%s: every docs path and #anchor exists', (file) => {
    for (const { path, anchor } of pointers(file)) {
      expect(existsSync(join(repoRoot, path)), `${file}: ${path} exists`).toBe(true);
      if (anchor !== undefined)
        expect([...headingAnchors(readDoc(path))], `${file}: #${anchor} is a heading of ${path}`).toContain(anchor);
    }
  });
  it.each(FILES)('%s: every README "Section" it names is a README heading', (file) => {
    const named = [...readDoc(file).matchAll(/README \\?"([^"\\]+)\\?"/g)].map((m) => m[1]!);
    expect(named.filter((s) => !readmeSections.has(s))).toEqual([]);
  });
});
