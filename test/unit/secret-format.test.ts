import { readFileSync } from 'node:fs';
import { crc32 } from 'node:zlib';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  BASE62,
  base62Checksum,
  generateSecret,
  isIssuedSecret,
  secretChecksum,
  secretPattern,
} from '../../src/keys/secret-format.js';
import { readSecretPrefix } from '../../src/config/read-secret-prefix.js';

const runs = Number(process.env.KEYGATE_PROPERTY_RUNS ?? 150);

/** An independent CRC-32 (IEEE, reflected, table-driven): the oracle beside zlib's. */
const TABLE = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});
function tableCrc32(s: string): number {
  let c = 0xffffffff;
  for (const b of Buffer.from(s)) c = (TABLE[(c ^ b) & 0xff] as number) ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}
const fromBase62 = (s: string) => [...s].reduce((n, ch) => n * 62 + BASE62.indexOf(ch), 0);

describe('issued secrets', () => {
  it('kgs_ + 40 base62 + 6 base62 of checksum, every one different', () => {
    const seen = new Set<string>();
    for (let i = 0; i < 200; i++) {
      const s = generateSecret();
      expect(s).toMatch(/^kgs_[0-9A-Za-z]{46}$/);
      expect(isIssuedSecret(s)).toBe(true);
      seen.add(s);
    }
    expect(seen.size).toBe(200);
  });

  it('property: the checksum is zlib CRC32 of the first 44 characters in base62, left-padded with 0', () => {
    fc.assert(
      fc.property(fc.stringMatching(/^[0-9A-Za-z]{40}$/), (random) => {
        const body = `kgs_${random}`;
        const sum = secretChecksum(body);
        expect(sum).toHaveLength(6);
        expect(fromBase62(sum)).toBe(crc32(body));
        expect(crc32(body)).toBe(tableCrc32(body));
        expect(isIssuedSecret(body + sum)).toBe(true);
      }),
      { numRuns: runs },
    );
  });

  it('property: any one character changed fails the checksum', () => {
    const s = generateSecret();
    fc.assert(
      fc.property(fc.integer({ min: 4, max: 49 }), fc.constantFrom(...BASE62), (i, ch) => {
        fc.pre(s[i] !== ch);
        expect(isIssuedSecret(s.slice(0, i) + ch + s.slice(i + 1))).toBe(false);
      }),
      { numRuns: runs },
    );
  });

  it('pads small checksums with 0 and fits 2^32-1 in six characters', () => {
    expect(base62Checksum(0)).toBe('000000');
    expect(base62Checksum(61)).toBe('00000z');
    expect(base62Checksum(0xffffffff)).toBe('4gfFC3');
    expect(fromBase62('4gfFC3')).toBe(0xffffffff);
  });

  it("a known vector agrees with zlib (python3 -c \"import zlib; print(zlib.crc32(b'kgs_' + b'A' * 40))\")", () => {
    const body = `kgs_${'A'.repeat(40)}`;
    expect(secretChecksum(body)).toBe('1Og7Uj');
    expect(secretChecksum(body)).toBe(base62Checksum(tableCrc32(body)));
  });

  it('another prefix is used as given; KEYGATE_SECRET_PREFIX is 2–12 of a-z0-9 then _', () => {
    const s = generateSecret('acme_');
    expect(s).toMatch(/^acme_[0-9A-Za-z]{46}$/);
    expect(isIssuedSecret(s, 'acme_')).toBe(true);
    expect(isIssuedSecret(s)).toBe(false);
    const problems: string[] = [];
    expect(readSecretPrefix({ KEYGATE_SECRET_PREFIX: 'acme_' }, problems)).toBe('acme_');
    expect(readSecretPrefix({}, problems)).toBeUndefined();
    for (const bad of ['a_', 'ACME_', 'acme', 'abcdefghijklm_', 'ac-me_', 'acme__'])
      expect(readSecretPrefix({ KEYGATE_SECRET_PREFIX: bad }, problems)).toBeUndefined();
    expect(problems).toHaveLength(6);
    expect(problems[0]).toMatch(/^KEYGATE_SECRET_PREFIX: /);
  });
});

describe('deploy/secret-scanning rules', () => {
  const gitleaks = readFileSync('deploy/secret-scanning/gitleaks.toml', 'utf8');
  const github = readFileSync('deploy/secret-scanning/github-custom-pattern.yml', 'utf8');
  const gitleaksRegex = /^regex = '''(.*)'''$/m.exec(gitleaks)?.[1] as string;
  const githubFormat = /^secret_format: '(.*)'$/m.exec(github)?.[1] as string;

  it('both hold the pattern docs/keys.md gives', () => {
    expect(gitleaksRegex).toContain(secretPattern());
    expect(githubFormat).toBe(secretPattern());
    expect(readFileSync('docs/keys.md', 'utf8')).toContain(secretPattern());
  });

  it('both match generated secrets inside text, and neither matches a longer run or an older secret', () => {
    // gitleaks is Go RE2 and GitHub's is Hyperscan: these patterns use nothing JavaScript reads differently.
    const g = new RegExp(gitleaksRegex);
    const before = /^before_secret: '(.*)'$/m.exec(github)?.[1] as string;
    const after = /^after_secret: '(.*)'$/m.exec(github)?.[1] as string;
    const h = new RegExp(`(?:${before.replace('\\A', '^')})(${githubFormat})(?:${after.replace('\\z', '$')})`);
    for (let i = 0; i < 50; i++) {
      const s = generateSecret();
      for (const text of [s, `KEYGATE_API_SECRET=${s}\n`, `"apiSecret": "${s}",`]) {
        expect(g.exec(text)?.[1]).toBe(s);
        expect(h.exec(text)?.[1]).toBe(s);
      }
      expect(g.test(`${s}x`)).toBe(false);
      expect(h.test(`${s}x`)).toBe(false);
    }
    expect(g.test('Zm9vYmFyYmF6cXV4Zm9vYmFyYmF6cXV4Zm9vYmFyYmF')).toBe(false);
  });

  it("a look-alike with a bad checksum matches the tools' regex (they cannot compute one); isIssuedSecret rejects it", () => {
    const s = generateSecret();
    const bad = s.slice(0, -1) + (s.endsWith('0') ? '1' : '0');
    expect(new RegExp(gitleaksRegex).test(bad)).toBe(true);
    expect(isIssuedSecret(bad)).toBe(false);
  });
});
