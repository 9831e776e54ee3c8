import { describe, expect, it } from 'vitest';
import { groupKeyProblems } from '../../src/keys/key-problems.js';

const F = 'keys.yaml';
const missing = (n: number) => Array.from({ length: n }, (_, i) => `${F}: keys[${i}].apiSecret: required`);

describe('groupKeyProblems: one line per kind of problem, every kind at once', () => {
  it.each([
    {
      name: 'an export without --with-secrets: one line naming the flag',
      problems: missing(1_000),
      options: { total: 1_000 },
      out: [
        `${F}: apiSecret missing in 1,000 of 1,000 keys: this looks like an export without --with-secrets (keygate keys export --with-secrets writes a file that imports)`,
      ],
    },
    {
      name: 'the export header says so, even when some keys (EdDSA) need no secret',
      problems: missing(3),
      options: { total: 5, exportWithoutSecrets: true },
      out: [
        `${F}: apiSecret missing in 3 of 5 keys: this looks like an export without --with-secrets (keygate keys export --with-secrets writes a file that imports)`,
      ],
    },
    {
      name: 'some keys without a secret in a hand-written file: which ones, no guess',
      problems: missing(5),
      options: { total: 9 },
      out: [`${F}: apiSecret missing in 5 of 9 keys (keys[0], keys[1], keys[2] and 2 more)`],
    },
    {
      name: 'a problem of one key, or of the file, keeps its wording',
      problems: [
        `${F}: keys[1].allowIps: invalid IP or CIDR "10.0.0.300/8"`,
        `${F}: keys: expected a top-level "keys" list`,
      ],
      options: {},
      out: [
        `${F}: keys[1].allowIps: invalid IP or CIDR "10.0.0.300/8"`,
        `${F}: keys: expected a top-level "keys" list`,
      ],
    },
    {
      name: 'several kinds: each once, in the order first met',
      problems: [
        `${F}: keys[0].apiSecret: required`,
        `${F}: keys[0].scopes: invalid scope "a b"`,
        `${F}: keys[1].apiSecret: required`,
        `${F}: keys[2].scopes: invalid scope "a b"`,
        `${F}: keys[3]: duplicate apiKey`,
        `${F}: keys[2].scoeps: unknown setting (not in the schema; a typo?)`,
      ],
      options: { total: 4 },
      out: [
        `${F}: apiSecret missing in 2 of 4 keys (keys[0], keys[1])`,
        `${F}: keys[*].scopes: invalid scope "a b", in 2 of 4 keys (keys[0], keys[2])`,
        `${F}: keys[3]: duplicate apiKey`,
        `${F}: keys[2].scoeps: unknown setting (not in the schema; a typo?)`,
      ],
    },
  ])('$name', ({ problems, options, out }) => {
    expect(groupKeyProblems(problems, F, options)).toEqual(out);
  });
});
