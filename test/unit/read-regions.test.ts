import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load-config.js';
import { ConfigError } from '../../src/files/config-error.js';

/**
 * Regions settings (src/config/read-regions.ts, src/policy/regions.ts): KEYGATE_REGION against the policy's
 * `regions:` map, both entry forms, and every bad entry reported together with the rest.
 */
const dir = mkdtempSync(join(tmpdir(), 'keygate-read-regions-'));
let n = 0;
function policy(lines: string[]): string {
  const file = join(dir, `policy-${n++}.yaml`);
  writeFileSync(file, ['routes: []', ...lines, ''].join('\n'));
  return file;
}
const TWO = [
  'regions:',
  '  fra: { redis: "redis://10.0.0.1:6379" }',
  '  tyo: { sentinels: "10.1.0.1:26379,10.1.0.2:26379", sentinelName: tyo-state, tls: true }',
];
const base = { KEYGATE_UPSTREAM: 'http://127.0.0.1:3000', KEYGATE_REDIS_URL: 'redis://127.0.0.1:6379' };

function problemsOf(env: Record<string, string>): string[] {
  try {
    loadConfig(env);
    return [];
  } catch (err) {
    if (err instanceof ConfigError) return [...err.problems];
    throw err;
  }
}

describe('regions settings', () => {
  const cases: Array<{ name: string; env: Record<string, string>; problems: RegExp[] }> = [
    { name: 'no regions, no KEYGATE_REGION: nothing read', env: { ...base }, problems: [] },
    {
      name: 'a listed region (server form)',
      env: { ...base, KEYGATE_CONFIG: policy(TWO), KEYGATE_REGION: 'fra' },
      problems: [],
    },
    {
      name: 'a listed region (Sentinel form)',
      env: { ...base, KEYGATE_CONFIG: policy(TWO), KEYGATE_REGION: 'tyo' },
      problems: [],
    },
    {
      name: 'an unlisted region is named',
      env: { ...base, KEYGATE_CONFIG: policy(TWO), KEYGATE_REGION: 'iad' },
      problems: [/KEYGATE_REGION: "iad" is not listed under regions: .*\(listed: fra, tyo\)/],
    },
    {
      name: 'regions listed without KEYGATE_REGION',
      env: { ...base, KEYGATE_CONFIG: policy(TWO) },
      problems: [/KEYGATE_REGION: required, since .* lists regions: \(fra, tyo\)/],
    },
    {
      name: 'KEYGATE_REGION without regions',
      env: { ...base, KEYGATE_REGION: 'fra' },
      problems: [/KEYGATE_REGION: set to "fra", but .* lists no regions:/],
    },
    {
      name: 'the replica and the bound without regions',
      env: { ...base, KEYGATE_KEYSTORE_REPLICA_URL: 'redis://r:6379', KEYGATE_KEYSTORE_MAX_STALENESS_MS: '800' },
      problems: [
        /KEYGATE_KEYSTORE_REPLICA_URL: only used with regions/,
        /KEYGATE_KEYSTORE_MAX_STALENESS_MS: only used with regions/,
      ],
    },
    {
      name: 'regions with the embedded store',
      env: { KEYGATE_UPSTREAM: 'http://127.0.0.1:3000', KEYGATE_CONFIG: policy(TWO), KEYGATE_REGION: 'fra' },
      problems: [/regions: need the keystore in Redis/],
    },
    {
      name: 'bad entries, a bad default home and bad settings, all reported together',
      env: {
        ...base,
        KEYGATE_CONFIG: policy([
          'regions:',
          '  fra: { redis: "http://10.0.0.1" }',
          '  tyo: { sentinels: "10.1.0.1:26379" }',
          '  iad: { redis: "redis://a:1", sentinels: "b:2", sentinelName: x }',
          '  Bad: { redis: "redis://a:1" }',
          '  sfo: {}',
          'defaultHome: lon',
        ]),
        KEYGATE_REGION: 'fra',
        KEYGATE_KEYSTORE_REPLICA_URL: 'tcp://replica',
        KEYGATE_KEYSTORE_MAX_STALENESS_MS: '10',
      },
      problems: [
        /regions\.fra\.redis: must start with redis:\/\/ or rediss:\/\//,
        /regions\.tyo\.sentinelName: required with sentinels/,
        /regions\.iad: give either redis or sentinels/,
        /regions\.Bad: a region name/,
        /regions\.sfo: needs redis: <URL> or sentinels/,
        /defaultHome: "lon" is not listed under regions:/,
        /KEYGATE_KEYSTORE_REPLICA_URL: must start with redis:\/\//,
        /KEYGATE_KEYSTORE_MAX_STALENESS_MS: must be an integer between 300 and 60000/,
      ],
    },
  ];
  for (const c of cases)
    it(c.name, () => {
      const problems = problemsOf(c.env);
      for (const p of c.problems)
        expect(
          problems.some((x) => p.test(x)),
          `${String(p)} in ${problems.join(' | ')}`,
        ).toBe(true);
      if (c.problems.length === 0) expect(problems).toEqual([]);
    });

  it('both entry forms are read into connections; the default home is the first region listed', () => {
    const c = loadConfig({ ...base, KEYGATE_CONFIG: policy(TWO), KEYGATE_REGION: 'tyo' });
    expect(c.regions).toEqual({
      self: 'tyo',
      defaultHome: 'fra',
      groups: [
        { name: 'fra', connection: { mode: 'standalone', url: 'redis://10.0.0.1:6379' } },
        {
          name: 'tyo',
          connection: {
            mode: 'sentinel',
            sentinels: [
              { host: '10.1.0.1', port: 26379 },
              { host: '10.1.0.2', port: 26379 },
            ],
            masterName: 'tyo-state',
            tls: true,
          },
        },
      ],
      keystoreReplica: undefined,
      maxStalenessMs: 1000,
    });
  });

  it('without regions, the config has none', () => {
    expect(loadConfig({ ...base }).regions).toBeUndefined();
  });
});
