import { userInfo, hostname } from 'node:os';
import pino from 'pino';
import { describeRedis, readRedisSettings } from '../../config/redis-settings.js';
import { readRedisDurability } from '../../config/read-durability.js';
import { loadSecretEncryptionKeys } from '../../config/secret-encryption.js';
import { createRedisStore } from '../../store/redis/redis-store.js';
import { createSecretCipher } from '../../keys/secret-cipher.js';
import { REDIS_CAUSE_HINTS, type RedisCause } from '../../store/redis/connection/redis-reachability.js';
import { DurabilityError, StoreUnavailableError, type ConnectionProblem } from '../../store/store.js';
import { waitUntilAnswers } from '../../store/wait-ready.js';
import { CliError } from '../cli-errors.js';
import type { KeyStoreHandle } from '../cli-io.js';
import { flag, type Command, type OptionSpec } from '../command-line.js';
import { createKeyContext, type KeyAction } from './key-context.js';
import { KEY_ACTIONS } from './keys-actions.js';
import { keygenCommand } from './keygen-command.js';

const DETAILS = `Keys live in Redis (KEYGATE_REDIS_URL, or KEYGATE_REDIS_SENTINELS +
KEYGATE_REDIS_SENTINEL_NAME, or KEYGATE_REDIS_CLUSTER_NODES). Every change is
published so running Keygate instances drop their cached copy at once, and is
audited in the Redis stream keygate:{keystore}:audit as KEYGATE_ACTOR (default
user@host); --verbose also prints each audit entry on stderr. Import, export and
list show their progress on stderr when it is a terminal. Secrets are printed
only by create and rotate.
A change is done only once KEYGATE_REDIS_MIN_REPLICAS replicas have it
(default 1 under Sentinel and Cluster); if fewer acknowledge within
KEYGATE_REDIS_DURABILITY_TIMEOUT_MS it exits 1 and the change may or may not
survive a failover: run the same command again.
Exit status: 0 done, 1 no such key, the change was refused or not durable,
or Redis did not answer within 2 s, 2 usage.`;

/**
 * How long `keygate keys` waits for Redis to answer before giving up. A person is waiting at a terminal: long
 * enough for a connect and a Sentinel lookup on a busy host, short enough that a wrong URL is reported at once
 * (it used to take 8 s and end in the client library's wording).
 */
export const CLI_REDIS_WAIT_MS = 2_000;

/**
 * Why `keygate keys` stopped, in our words: which Redis (never its password), the cause in Redis's terms as
 * /readyz gives it (redis-reachability.ts; a connection that opened and never answered is a timeout too), and
 * what to check.
 */
export function redisUnreachable(target: string, problem?: ConnectionProblem): string {
  const cause = (problem?.cause ?? 'timeout') as RedisCause;
  const hint = cause === 'other' ? (problem?.err ?? 'no detail') : (REDIS_CAUSE_HINTS[cause] ?? problem?.err);
  return (
    `Redis at ${target} did not answer within ${CLI_REDIS_WAIT_MS / 1000} s (cause: ${cause}; ${hint}). ` +
    'Check that it is running and reachable from this host, and the Redis settings this command read ' +
    '(KEYGATE_REDIS_URL, or KEYGATE_REDIS_SENTINELS + KEYGATE_REDIS_SENTINEL_NAME, or KEYGATE_REDIS_CLUSTER_NODES; ' +
    'a password in KEYGATE_REDIS_PASSWORD or the URL).'
  );
}

const NO_REDIS = `no Redis is configured (KEYGATE_REDIS_URL, KEYGATE_REDIS_SENTINELS or KEYGATE_REDIS_CLUSTER_NODES).
In embedded mode the keys file (KEYGATE_KEYS_FILE) is the source of keys:
edit it (Keygate reloads it on change and on SIGHUP). To manage keys with
this command, run Keygate with Redis.`;

/** The Redis store `keygate keys` manages, from the same settings `keygate serve` reads. */
export async function openRedisKeyStore(env: NodeJS.ProcessEnv): Promise<KeyStoreHandle> {
  const problems: string[] = [];
  const connection = readRedisSettings(env, problems);
  if (problems.length > 0) throw new CliError(`invalid Redis settings:\n  - ${problems.join('\n  - ')}`, 2);
  if (!connection) throw new CliError(NO_REDIS, 2);
  const durability = readRedisDurability(env, connection, problems);
  const encryptionKeys = loadSecretEncryptionKeys(env, problems);
  const cipher = encryptionKeys && createSecretCipher(encryptionKeys);
  if (problems.length > 0) throw new CliError(problems.join('\n  '), 2);
  const store = createRedisStore(
    { connection, commandTimeoutMs: 5_000, ...(cipher && { cipher }), ...(durability && { durability }) },
    { logger: pino({ level: 'silent' }) },
  );
  try {
    // Both connections a key command uses: the first command goes over the key operations' own.
    await waitUntilAnswers(() => Promise.all([store.ping(), store.pingKeyOperations()]), CLI_REDIS_WAIT_MS, 50);
  } catch (err) {
    const problem = store.connectionProblem();
    await store.close();
    if (!(err instanceof StoreUnavailableError)) throw err;
    // The client library's own text ("Stream isn't writeable…") names none of our settings: say it ourselves.
    throw new CliError(redisUnreachable(describeRedis(connection) ?? 'the configured address', problem), 1);
  }
  return { store, encrypted: cipher !== undefined };
}

/** Every key action takes --verbose: the audit entries belong in the audit stream, not on the terminal. */
export const VERBOSE_OPTION: OptionSpec = {
  name: 'verbose',
  type: 'boolean',
  help: 'also print each audit entry (a JSON line per key changed) on stderr',
};

/** A row of the keys table as a command: parsed and helped like any other, run with a store and a context. */
export const asCommand = (action: KeyAction): Command => ({
  spec: { ...action.spec, options: [...action.spec.options, VERBOSE_OPTION] },
  async run(parsed, io) {
    const { store, encrypted } = await io.openKeyStore(io.env);
    // Every entry is in the Redis stream with its change (one atomic step); this is only the terminal's copy.
    const audit = pino(
      { name: 'keygate-audit', base: null, level: flag(parsed, 'verbose') ? 'info' : 'silent' },
      io.err,
    );
    const ctx = createKeyContext({
      store,
      encrypted,
      out: io.out,
      err: io.err,
      now: () => Date.now(),
      actor: io.env.KEYGATE_ACTOR || `${safeUser()}@${hostname()}`,
      audit: (entry) => audit.info({ audit: entry }, 'key change'),
    });
    try {
      await action.run(ctx, parsed);
      return 0;
    } catch (err) {
      // Written, but not on enough replicas: exit 1 and say so (a retry of the same command is safe).
      if (err instanceof DurabilityError) throw new CliError(err.message, 1);
      throw err;
    } finally {
      await store.close();
    }
  },
});

export const keysCommand: Command = {
  spec: { name: 'keys', summary: 'manage API keys in Redis', options: [], details: DETAILS },
  // keygen needs no store: the key pair is the client's, made on the client's side.
  subcommands: [...KEY_ACTIONS.map(asCommand), keygenCommand],
};

function safeUser(): string {
  try {
    return userInfo().username;
  } catch {
    return 'unknown';
  }
}
