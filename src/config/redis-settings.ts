import { readSecretEnv } from './secret-env.js';

/** Where Keygate's Redis lives: one server, a Sentinel-managed master, or a Cluster. */
export type RedisConnection =
  | { readonly mode: 'standalone'; readonly url: string }
  | {
      readonly mode: 'sentinel';
      readonly sentinels: readonly HostPort[];
      readonly masterName: string;
      readonly password?: string;
      /** The sentinels and the nodes they name are reached over TLS (KEYGATE_REDIS_SENTINEL_TLS, a region's `tls`). */
      readonly tls?: boolean;
    }
  | { readonly mode: 'cluster'; readonly nodes: readonly HostPort[]; readonly password?: string };

export interface HostPort {
  readonly host: string;
  readonly port: number;
}

type Env = Readonly<Record<string, string | undefined>>;

const HOST =
  /^(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*|\[[0-9A-Fa-f:.]+\])$/;

/** Parses "host:port,host:port" ("[::1]:port" for IPv6); pushes one problem per bad entry. */
export function parseHostPortList(name: string, raw: string, problems: string[]): HostPort[] {
  const out: HostPort[] = [];
  const entries = raw
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s.length > 0);
  if (entries.length === 0) problems.push(`${name}: needs at least one host:port`);
  for (const entry of entries) {
    const m = /^(.+):(\d{1,5})$/.exec(entry);
    const port = m ? Number(m[2]) : NaN;
    if (!m || !HOST.test(m[1]!) || port < 1 || port > 65535) {
      problems.push(`${name}: ${JSON.stringify(entry)} is not host:port (IPv6 as [addr]:port)`);
      continue;
    }
    out.push({ host: m[1]!.replace(/^\[(.*)\]$/, '$1'), port });
  }
  return out;
}

/**
 * Reads the Redis settings. At most one of KEYGATE_REDIS_URL,
 * KEYGATE_REDIS_SENTINELS (+ KEYGATE_REDIS_SENTINEL_NAME) and
 * KEYGATE_REDIS_CLUSTER_NODES may be set; none means the embedded store.
 */
export function readRedisSettings(env: Env, problems: string[]): RedisConnection | undefined {
  const url = readSecretEnv(env, 'KEYGATE_REDIS_URL', 'KEYGATE_REDIS_URL_FILE', problems);
  const sentinels = env.KEYGATE_REDIS_SENTINELS || undefined;
  const masterName = env.KEYGATE_REDIS_SENTINEL_NAME || undefined;
  const clusterNodes = env.KEYGATE_REDIS_CLUSTER_NODES || undefined;
  const sentinelTls = env.KEYGATE_REDIS_SENTINEL_TLS || undefined;
  if (sentinelTls !== undefined && sentinelTls !== 'true' && sentinelTls !== 'false')
    problems.push(`KEYGATE_REDIS_SENTINEL_TLS: "true" or "false", got ${JSON.stringify(sentinelTls)}`);
  if (sentinelTls !== undefined && sentinels === undefined)
    problems.push('KEYGATE_REDIS_SENTINEL_TLS: only used with KEYGATE_REDIS_SENTINELS');
  const password = readSecretEnv(env, 'KEYGATE_REDIS_PASSWORD', 'KEYGATE_REDIS_PASSWORD_FILE', problems);

  const chosen = [
    url && 'KEYGATE_REDIS_URL',
    sentinels && 'KEYGATE_REDIS_SENTINELS',
    clusterNodes && 'KEYGATE_REDIS_CLUSTER_NODES',
  ].filter(Boolean);
  if (chosen.length > 1) problems.push(`${chosen.join(', ')}: set only one of them (one Redis deployment per Keygate)`);
  if (masterName !== undefined && sentinels === undefined)
    problems.push('KEYGATE_REDIS_SENTINEL_NAME: only used with KEYGATE_REDIS_SENTINELS');
  if (password !== undefined && url !== undefined)
    problems.push(
      'KEYGATE_REDIS_PASSWORD: with KEYGATE_REDIS_URL, put the password in the URL (redis://:password@host:port)',
    );
  else if (password !== undefined && sentinels === undefined && clusterNodes === undefined)
    problems.push('KEYGATE_REDIS_PASSWORD: only used with KEYGATE_REDIS_SENTINELS or KEYGATE_REDIS_CLUSTER_NODES');

  if (url !== undefined) {
    if (!/^rediss?:\/\//.test(url)) problems.push('KEYGATE_REDIS_URL: must start with redis:// or rediss://');
    return { mode: 'standalone', url };
  }
  if (sentinels !== undefined) {
    const list = parseHostPortList('KEYGATE_REDIS_SENTINELS', sentinels, problems);
    if (masterName === undefined)
      problems.push(
        'KEYGATE_REDIS_SENTINEL_NAME: required with KEYGATE_REDIS_SENTINELS (the master name the sentinels monitor)',
      );
    else if (!/^[A-Za-z0-9._-]{1,128}$/.test(masterName))
      problems.push('KEYGATE_REDIS_SENTINEL_NAME: letters, digits, ".", "_" and "-" only');
    return {
      mode: 'sentinel',
      sentinels: list,
      masterName: masterName ?? '',
      ...(password !== undefined && { password }),
      ...(sentinelTls === 'true' && { tls: true }),
    };
  }
  if (clusterNodes !== undefined) {
    const list = parseHostPortList('KEYGATE_REDIS_CLUSTER_NODES', clusterNodes, problems);
    return { mode: 'cluster', nodes: list, ...(password !== undefined && { password }) };
  }
  return undefined;
}

/** Query parameters of a Redis URL that hold a credential (password, sentinelPassword, …). */
const SECRET_PARAM = /pass|secret|token/i;

/** For logs: never includes a password. */
export function describeRedis(conn: RedisConnection | undefined): string | undefined {
  if (!conn) return undefined;
  const list = (l: readonly HostPort[]) =>
    l.map((h) => (h.host.includes(':') ? `[${h.host}]:${h.port}` : `${h.host}:${h.port}`)).join(',');
  switch (conn.mode) {
    case 'standalone':
      try {
        const u = new URL(conn.url);
        if (u.password) u.password = '***';
        // ioredis turns every query parameter into a connection option, so ?password= authenticates too.
        for (const name of [...u.searchParams.keys()]) if (SECRET_PARAM.test(name)) u.searchParams.set(name, '***');
        return u.toString();
      } catch {
        return '***';
      }
    case 'sentinel':
      return `sentinel ${conn.masterName} via ${conn.tls === true ? 'tls ' : ''}${list(conn.sentinels)}`;
    case 'cluster':
      return `cluster ${list(conn.nodes)}`;
  }
}
