/**
 * Every variable Keygate reads, so a misspelt one (REDIS_ULR for REDIS_URL) is reported instead of
 * silently leaving its default in force. test/unit/env-names.test.ts proves this list equals the names
 * the rest of src/ reads and the rows of docs/reference/configuration.md, so it cannot drift.
 */
export const ENV_SETTING_NAMES: readonly string[] = [
  'KEYGATE_ACTOR',
  'KEYGATE_ADMIN_HOST',
  'KEYGATE_ADMIN_PORT',
  'KEYGATE_ALLOW_EVICTING_REDIS',
  'KEYGATE_ALLOW_VOLATILE_KEY_CHANGES',
  'KEYGATE_API_KEY',
  'KEYGATE_API_SECRET',
  'KEYGATE_ASSERTION_AUDIENCE',
  'KEYGATE_ASSERTION_ISSUER',
  'KEYGATE_ASSERTION_KEYS_FILE',
  'KEYGATE_ASSERTION_MODE',
  'KEYGATE_ASSERTION_SIGNING_KID',
  'KEYGATE_ASSERTION_TTL_SECONDS',
  'KEYGATE_BODY_RATE_GRACE_MS',
  'KEYGATE_BOUND_BODY_MAX_BYTES',
  'KEYGATE_CONFIG',
  'KEYGATE_DEMO_UPSTREAM_PORT',
  'KEYGATE_FORWARD_AUTH_PATH_PREFIX',
  'KEYGATE_GITHUB_SCANNING_KEYS_FILE',
  'KEYGATE_HEADERS_TIMEOUT_MS',
  'KEYGATE_HOST',
  'KEYGATE_KEEP_ALIVE_TIMEOUT_MS',
  'KEYGATE_KEYSTORE_MAX_STALENESS_MS',
  'KEYGATE_KEYSTORE_REPLICA_URL',
  'KEYGATE_KEYS_FILE',
  'KEYGATE_KEY_CACHE_MAX',
  'KEYGATE_KEY_CACHE_NEGATIVE_TTL_MS',
  'KEYGATE_KEY_CACHE_TTL_MS',
  'KEYGATE_LOG_LEVEL',
  'KEYGATE_MANAGEMENT_HOST',
  'KEYGATE_MANAGEMENT_PORT',
  'KEYGATE_MANAGEMENT_TOKENS_FILE',
  'KEYGATE_MAX_HEADER_BYTES',
  'KEYGATE_MAX_HEADER_COUNT',
  'KEYGATE_MAX_IN_FLIGHT',
  'KEYGATE_MAX_STREAMS_PER_KEY',
  'KEYGATE_MAX_TOKEN_BYTES',
  'KEYGATE_MIN_BODY_BYTES_PER_SECOND',
  'KEYGATE_MODE',
  'KEYGATE_PORT',
  'KEYGATE_RATE_LIMIT_HEADERS',
  'KEYGATE_READY_REQUIRES_KEYS',
  'KEYGATE_REDIS_CLUSTER_NODES',
  'KEYGATE_REDIS_PASSWORD',
  'KEYGATE_REDIS_PASSWORD_FILE',
  'KEYGATE_REDIS_DURABILITY_TIMEOUT_MS',
  'KEYGATE_REDIS_MIN_REPLICAS',
  'KEYGATE_REDIS_SENTINELS',
  'KEYGATE_REDIS_SENTINEL_NAME',
  'KEYGATE_REDIS_SENTINEL_TLS',
  'KEYGATE_REDIS_TIMEOUT_MS',
  'KEYGATE_REDIS_URL',
  'KEYGATE_REDIS_URL_FILE',
  'KEYGATE_REGION',
  'KEYGATE_REPLAY_FENCE',
  'KEYGATE_REQUEST_TIMEOUT_MS',
  'KEYGATE_SECRET_ENCRYPTION_KEY',
  'KEYGATE_SECRET_ENCRYPTION_KEY_FILE',
  'KEYGATE_SECRET_ENCRYPTION_KEY_PREVIOUS',
  'KEYGATE_SECRET_PREFIX',
  'KEYGATE_SECRET_ENCRYPTION_KEY_PREVIOUS_FILE',
  'KEYGATE_SHUTDOWN_TIMEOUT_MS',
  'KEYGATE_STREAM_CLOSE_GRACE_MS',
  'KEYGATE_STREAM_IDLE_TIMEOUT_MS',
  'KEYGATE_UPSTREAM',
  'KEYGATE_UPSTREAM_MAX_SOCKETS',
  'KEYGATE_UPSTREAM_QUEUE_TIMEOUT_MS',
  'KEYGATE_UPSTREAM_TIMEOUT_MS',
  'KEYGATE_WEBHOOK_SECRET',
  'KEYGATE_WEBHOOK_SECRET_FILE',
  'KEYGATE_WEBHOOK_TIMEOUT_MS',
  'KEYGATE_WEBHOOK_URL',
  'KEYGATE_WORKERS',
];

/**
 * Names the test suite, benchmarks and container scripts read. They share the environment of the
 * Keygate processes the suite spawns, so they are not reported. They are spelled without the prefix
 * here on purpose: these are not settings, and the docs checks (envNamesInCode) must not take them
 * for ones. The prefixes below (TEST_, CT_ after the common one) are reserved for such names.
 */
const TOOLING_SUFFIXES = [
  'PROPERTY_RUNS',
  'RACE_ROUNDS',
  'ABORTS',
  'SOAK_SECONDS',
  'WRITE_SCREENSHOT',
  'WRITE_DOCS',
  'CONTAINERS_CACHE',
] as const;
export const TOOLING_ENV_NAMES: readonly string[] = TOOLING_SUFFIXES.map((suffix) => `KEYGATE_${suffix}`);
export const TOOLING_ENV_PREFIXES: readonly string[] = ['TEST_', 'CT_'].map((p) => `KEYGATE_${p}`);

/**
 * Edit distance with adjacent transpositions (optimal string alignment): ULR to URL is one step, as a
 * typist would count it, where plain Levenshtein says two.
 */
export function editDistance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) =>
    Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)),
  );
  for (let i = 1; i <= a.length; i++)
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let best = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1])
        best = Math.min(best, d[i - 2]![j - 2]! + 1);
      d[i]![j] = best;
    }
  return d[a.length]![b.length]!;
}

/** The known name closest to `name` (the first in list order on a tie). */
export function nearestEnvName(name: string, known: readonly string[] = ENV_SETTING_NAMES): string {
  let best = known[0]!;
  let bestDistance = Infinity;
  for (const candidate of known) {
    const distance = editDistance(name, candidate);
    if (distance < bestDistance) [best, bestDistance] = [candidate, distance];
  }
  return best;
}

/**
 * One sentence per variable with Keygate's prefix in `env` that Keygate does not read (tooling names excepted),
 * naming the nearest known one. `serve` logs them as warnings; `check-config` fails with them.
 */
export function unknownEnvProblems(env: Readonly<Record<string, string | undefined>>): string[] {
  const known = new Set([...ENV_SETTING_NAMES, ...TOOLING_ENV_NAMES]);
  return Object.keys(env)
    .filter((name) => name.startsWith('KEYGATE_') && !known.has(name))
    .filter((name) => !TOOLING_ENV_PREFIXES.some((prefix) => name.startsWith(prefix)))
    .sort()
    .map((name) => `${name}: not a Keygate setting, ignored (did you mean ${nearestEnvName(name)}?)`);
}
