import { userInfo, hostname } from 'node:os';
import { parseArgs } from 'node:util';
import pino from 'pino';
import { readRedisSettings } from '../config/redis-settings.js';
import { loadSecretEncryptionKeys } from '../config/secret-encryption.js';
import { createRedisStore } from '../store/redis-store.js';
import { createSecretCipher } from '../store/secret-cipher.js';
import { waitStoreReady } from '../store/wait-ready.js';
import { runKeyAction, type KeyActionContext } from './keys-actions.js';

const HELP = `Usage: keygate keys <action> [options]

  create [--owner account-id] [--scopes a,b] [--allow-ip 10.0.0.0/8,::1] [--label text] [--expires-at ISO | --ttl 30d]
         [--rate-limit 100/s [--burst 200]] [--json]
  list [--owner account-id] [--state active|revoked|expired] [--sort last-used] [--json]
  show <apiKey>
  usage <apiKey> [--days 30] [--json]         last used, and requests per UTC day (kept 35 days)
  update <apiKey> [--scopes a,b] [--allow-ip cidrs] [--label text] [--expires-at ISO | --ttl 30d | --no-expiry]
         [--rate-limit 100/s|none] [--burst 200]   units /s /m /h; none = the policy defaultRateLimit applies
  rotate <apiKey> [--grace 300s] [--json]     new secret; the old one works for the grace period
  revoke <apiKey> [--reason text]
  delete <apiKey>
  export [--with-secrets] [--out file.yaml|file.json]
  import <file> [--replace]
  reencrypt                                   re-seal every secret with KEYGATE_SECRET_ENCRYPTION_KEY

Keys live in Redis (KEYGATE_REDIS_URL, or KEYGATE_REDIS_SENTINELS +
KEYGATE_REDIS_SENTINEL_NAME, or KEYGATE_REDIS_CLUSTER_NODES). Every change is
published so running Keygate instances drop their cached copy at once, and is
audited (stderr and the Redis stream keygate:audit). Secrets are printed only
by create and rotate.
`;

const NO_REDIS = `keygate keys: no Redis is configured (KEYGATE_REDIS_URL, KEYGATE_REDIS_SENTINELS or KEYGATE_REDIS_CLUSTER_NODES).
In embedded mode the keys file (KEYGATE_KEYS_FILE) is the source of keys:
edit it (Keygate reloads it on change and on SIGHUP). To manage keys with
this command, run Keygate with Redis.
`;

export async function keysCommand(argv: string[], env: NodeJS.ProcessEnv = process.env, out: NodeJS.WritableStream = process.stdout): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      scopes: { type: 'string' },
      'allow-ip': { type: 'string' },
      label: { type: 'string' },
      reason: { type: 'string' },
      state: { type: 'string' },
      'expires-at': { type: 'string' },
      ttl: { type: 'string' },
      'no-expiry': { type: 'boolean' },
      grace: { type: 'string' },
      'with-secrets': { type: 'boolean' },
      out: { type: 'string' },
      replace: { type: 'boolean' },
      json: { type: 'boolean' },
      'rate-limit': { type: 'string' },
      burst: { type: 'string' },
      sort: { type: 'string' },
      days: { type: 'string' },
      owner: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  const [action, arg] = positionals;
  if (values.help || !action) {
    out.write(HELP);
    return values.help ? 0 : 2;
  }
  const problems: string[] = [];
  const connection = readRedisSettings(env, problems);
  if (problems.length > 0) {
    process.stderr.write(`keygate keys: invalid Redis settings:\n  - ${problems.join('\n  - ')}\n`);
    return 2;
  }
  if (!connection) {
    process.stderr.write(NO_REDIS);
    return 2;
  }
  const encryptionKeys = loadSecretEncryptionKeys(env, problems);
  const cipher = encryptionKeys && createSecretCipher(encryptionKeys);
  if (problems.length > 0) {
    process.stderr.write(`keygate keys: ${problems.join('\n  ')}\n`);
    return 2;
  }
  const store = createRedisStore({ connection, commandTimeoutMs: 5_000, ...(cipher && { cipher }) }, { logger: pino({ level: 'silent' }) });
  const audit = pino({ name: 'keygate-audit', base: null }, pino.destination({ fd: 2, sync: true }));
  const ctx: KeyActionContext = {
    store,
    out,
    err: process.stderr,
    now: () => Date.now(),
    actor: env.KEYGATE_ACTOR || `${safeUser()}@${hostname()}`,
    audit: (entry) => audit.info({ audit: entry }, 'key change'),
    encrypted: cipher !== undefined,
  };
  try {
    await waitStoreReady(store, 5_000, 50);
    return await runKeyAction(action, arg, values, ctx);
  } finally {
    await store.close();
  }
}

function safeUser(): string {
  try {
    return userInfo().username;
  } catch {
    return 'unknown';
  }
}
