// Tested in test/unit/read-regions.test.ts (the regions: map read through loadConfig), test/e2e/regions-home.test.ts.
/** A region's name: what KEYGATE_REGION, a key's or owner's `home` and the policy's `regions:` keys are spelled in. */
export const REGION_NAME = /^[a-z0-9][a-z0-9_-]{0,31}$/;
export const REGION_NAME_RULE = 'a region name: a-z, 0-9, "_" and "-", starting with a letter or digit, at most 32';

/**
 * One region's request-state Redis as the policy file writes it: a server (`redis: <URL>`) or a Sentinel
 * group (`sentinels: "host:port,…"` and `sentinelName`), `tls: true` for a Sentinel group reached over TLS
 * (the sentinels and the nodes they name). The addresses are read into connections by src/config/read-regions.ts.
 */
export interface RegionEntry {
  readonly name: string;
  readonly redis?: string;
  readonly sentinels?: string;
  readonly sentinelName?: string;
  readonly tls?: boolean;
}

/** The policy's `regions:` map (file order) and the home of keys written before regions (`defaultHome`). */
export interface PolicyRegions {
  readonly entries: readonly RegionEntry[];
  /** Keys and owners without a home of their own live here: `defaultHome`, else the first region listed. */
  readonly defaultHome: string;
}

type Settings = Record<string, unknown>;

/**
 * Reads `regions:` and `defaultHome` (undefined when there is no `regions:`). The schema checks the shapes;
 * this checks what it cannot say (one form per entry, defaultHome listed) and reports every problem.
 */
export function readRegions(o: Settings, file: string, found: string[]): PolicyRegions | undefined {
  const raw = o.regions;
  if (raw === undefined || raw === null) {
    if (o.defaultHome !== undefined) found.push(`${file}: defaultHome: only used with regions:`);
    return undefined;
  }
  if (typeof raw !== 'object' || Array.isArray(raw)) {
    found.push(`${file}: regions: must be a map of region name → { redis: <URL> } or { sentinels, sentinelName }`);
    return undefined;
  }
  const entries: RegionEntry[] = [];
  for (const [name, value] of Object.entries(raw as Settings)) {
    const where = `${file}: regions.${name}`;
    if (!REGION_NAME.test(name)) found.push(`${where}: ${REGION_NAME_RULE}`);
    if (typeof value !== 'object' || value === null || Array.isArray(value)) {
      found.push(`${where}: must be { redis: <URL> } or { sentinels: "host:port,…", sentinelName: <name> }`);
      continue;
    }
    const e = value as Settings;
    const str = (k: string) => {
      const v = e[k];
      return typeof v === 'string' && v.length > 0 ? v : undefined;
    };
    const redis = str('redis');
    const sentinels = str('sentinels');
    const sentinelName = str('sentinelName');
    if (redis !== undefined && sentinels !== undefined)
      found.push(`${where}: give either redis or sentinels (with sentinelName), not both`);
    else if (redis === undefined && sentinels === undefined)
      found.push(`${where}: needs redis: <URL> or sentinels: "host:port,…" with sentinelName`);
    if (redis !== undefined && !/^rediss?:\/\//.test(redis))
      found.push(`${where}.redis: must start with redis:// or rediss://`);
    if (sentinels !== undefined && sentinelName === undefined)
      found.push(`${where}.sentinelName: required with sentinels (the master name the sentinels monitor)`);
    if (sentinelName !== undefined && sentinels === undefined)
      found.push(`${where}.sentinelName: only used with sentinels`);
    if (e.tls !== undefined && typeof e.tls !== 'boolean') found.push(`${where}.tls: true or false`);
    if (e.tls === true && sentinels === undefined)
      found.push(`${where}.tls: only used with sentinels (a server's URL says rediss://)`);
    entries.push({
      name,
      ...(redis !== undefined && { redis }),
      ...(sentinels !== undefined && { sentinels }),
      ...(sentinelName !== undefined && { sentinelName }),
      ...(e.tls === true && { tls: true }),
    });
  }
  if (entries.length === 0) found.push(`${file}: regions: lists no region`);
  const defaultHome = o.defaultHome ?? entries[0]?.name ?? '';
  if (typeof defaultHome !== 'string' || (entries.length > 0 && !entries.some((e) => e.name === defaultHome)))
    found.push(
      `${file}: defaultHome: ${JSON.stringify(defaultHome)} is not listed under regions: (${entries.map((e) => e.name).join(', ')})`,
    );
  return { entries, defaultHome: typeof defaultHome === 'string' ? defaultHome : '' };
}
