import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { startRedis, type TestRedis } from './redis-server.js';
import { ACCOUNTS_PATH } from './constants.js';
import { send } from './http.js';
import type { RunningKeygate } from './keygate.js';

/**
 * Regions on loopback for the e2e tests (docs/regions.md): a keystore master, its replica (the region's copy
 * the instances read), and one request-state Redis per region; the policy file naming them.
 */
export interface RegionsTopology {
  readonly keystore: TestRedis;
  readonly replica: TestRedis;
  readonly regions: Readonly<Record<string, TestRedis>>;
  readonly policyFile: string;
  /** The env of an instance of `region` reading the replica (or the keystore itself with `replica: false`). */
  envOf(region: string, options?: { replica?: boolean }): Record<string, string>;
  /** A plain client to one of the servers (closed by the caller). */
  connect(server: TestRedis): Promise<Redis>;
  stop(): Promise<void>;
}

export const PUBLIC_PATH = '/health';

/** `policy`: more top-level lines for the policy file (a short `maxRecvWindowSeconds`, say). */
export async function startRegions(
  names: readonly string[],
  defaultHome?: string,
  policy: readonly string[] = [],
): Promise<RegionsTopology> {
  const keystore = await startRedis();
  const replica = await startRedis({ args: ['--replicaof', '127.0.0.1', String(keystore.port)] });
  const regions: Record<string, TestRedis> = {};
  for (const n of names) regions[n] = await startRedis();
  const dir = mkdtempSync(join(tmpdir(), 'keygate-regions-'));
  const policyFile = join(dir, 'policy.yaml');
  writeFileSync(
    policyFile,
    [
      'routes:',
      `  - { method: GET, path: ${ACCOUNTS_PATH}, scopes: [accounts:read] }`,
      'public:',
      `  - { method: GET, path: ${PUBLIC_PATH} }`,
      'regions:',
      ...names.map((n) => `  ${n}: { redis: "${regions[n]!.url}" }`),
      ...(defaultHome ? [`defaultHome: ${defaultHome}`] : []),
      ...policy,
      '',
    ].join('\n'),
  );
  const clients: Redis[] = [];
  return {
    keystore,
    replica,
    regions,
    policyFile,
    envOf: (region, options = {}) => ({
      KEYGATE_REDIS_URL: keystore.url,
      KEYGATE_CONFIG: policyFile,
      KEYGATE_REGION: region,
      ...(options.replica !== false && { KEYGATE_KEYSTORE_REPLICA_URL: replica.url }),
    }),
    async connect(server) {
      const c = new Redis(server.url, { maxRetriesPerRequest: 0, retryStrategy: () => null, lazyConnect: true });
      c.on('error', () => {});
      await c.connect();
      clients.push(c);
      return c;
    },
    async stop() {
      for (const c of clients) c.disconnect();
      for (const s of [...Object.values(regions), replica, keystore]) await s.stop();
    },
  };
}

/** The count of refusals with this reason on an instance's /metrics. */
export async function refusals(gate: RunningKeygate, reason: string): Promise<number> {
  const text = (await send(gate.adminUrl, '/metrics')).body;
  const m = new RegExp(`keygate_auth_rejections_total\\{code="\\d+",reason="${reason}"\\} (\\d+)`).exec(text);
  return Number(m?.[1] ?? 0);
}
