// Tested in test/unit/keys-actions.test.ts, test/process/cli.test.ts, test/e2e/owner-limits.test.ts.
import { userInfo, hostname } from 'node:os';
import { DurabilityError } from '../../store/store.js';
import type { HomeRules } from '../../operations/homes.js';
import { loadPolicy } from '../../policy/load-policy.js';
import { DEFAULT_ROUTES_FILE } from '../../policy/policy.js';
import { largestRouteCost } from '../../policy/routes.js';
import { CliError } from '../cli-errors.js';
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
    const { store, encrypted, secretPrefix } = await io.openKeyStore(io.env);
    // Imported here: `keygate keys keygen` and every --help run without the logger.
    const { default: pino } = await import('pino');
    // Every entry is in the Redis stream with its change (one atomic step); this is only the terminal's copy.
    const audit = pino(
      { name: 'keygate-audit', base: null, level: flag(parsed, 'verbose') ? 'info' : 'silent' },
      io.err,
    );
    const ctx = createKeyContext({
      store,
      encrypted,
      costliestRoute: () => costliestRouteOf(io.env),
      regions: regionsOf(io.env),
      secretPrefix,
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

/**
 * The costliest route of the policy file `keygate serve` would read (KEYGATE_CONFIG, else the shipped
 * one). A file that does not load gives no warning: the command is about Redis, not the policy.
 */
function costliestRouteOf(env: NodeJS.ProcessEnv) {
  const problems: string[] = [];
  const policy = loadPolicy(env.KEYGATE_CONFIG || DEFAULT_ROUTES_FILE, problems);
  return problems.length > 0 ? undefined : largestRouteCost(policy.routes);
}

/**
 * Regions as `keygate serve` would read them (the policy file's `regions:`, KEYGATE_REGION): the homes a key or
 * owner may be given, and the one a new key gets. A file that does not load: regions off (a home is refused).
 */
function regionsOf(env: NodeJS.ProcessEnv): HomeRules | undefined {
  const problems: string[] = [];
  const regions = loadPolicy(env.KEYGATE_CONFIG || DEFAULT_ROUTES_FILE, problems).regions;
  if (regions === undefined || problems.length > 0) return undefined;
  return {
    self: env.KEYGATE_REGION || undefined,
    names: regions.entries.map((e) => e.name),
    defaultHome: regions.defaultHome,
  };
}

function safeUser(): string {
  try {
    return userInfo().username;
  } catch {
    return 'unknown';
  }
}
