import { parseArgs } from 'node:util';
import pino from 'pino';
import { readRedisSettings } from '../config/redis-settings.js';
import { generateKeyMaterial, parseKeyRecord, publicView, type KeyRecord } from '../store/key-record.js';
import { createRedisStore } from '../store/redis-store.js';
import type { Store } from '../store/types.js';

const HELP = `Usage: keygate keys <create|list|show|revoke|delete> [options]

  create [--scopes a,b] [--allow-ip 10.0.0.0/8,::1] [--label text] [--json]
  list [--state active|revoked] [--json]
  show <apiKey> [--json]
  revoke <apiKey> [--reason text]
  delete <apiKey>

Keys live in Redis (KEYGATE_REDIS_URL, or KEYGATE_REDIS_SENTINELS +
KEYGATE_REDIS_SENTINEL_NAME, or KEYGATE_REDIS_CLUSTER_NODES). Every change is published so running
Keygate instances drop their cached copy at once. The secret is printed only
by "create".
`;

const NO_REDIS = `keygate keys: no Redis is configured (KEYGATE_REDIS_URL, KEYGATE_REDIS_SENTINELS or KEYGATE_REDIS_CLUSTER_NODES).
In embedded mode the keys file (KEYGATE_KEYS_FILE) is the source of keys:
edit it and restart Keygate. To manage keys with this command, run Keygate
with Redis.
`;

function list(v: string | undefined): string[] {
  return v === undefined ? [] : v.split(',').map((s) => s.trim()).filter((s) => s.length > 0);
}

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
      json: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  const [action, apiKey] = positionals;
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
  const store = createRedisStore({ connection, commandTimeoutMs: 5_000 }, { logger: pino({ level: 'silent' }) });
  try {
    await waitReady(store);
    return await run(action, apiKey, values, store, out);
  } finally {
    await store.close();
  }
}

async function waitReady(store: Store): Promise<void> {
  const deadline = Date.now() + 5_000;
  for (;;) {
    try {
      return await store.ping();
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}

type Values = { scopes?: string; 'allow-ip'?: string; label?: string; reason?: string; state?: string; json?: boolean };

async function run(action: string, apiKey: string | undefined, values: Values, store: Store, out: NodeJS.WritableStream): Promise<number> {
  const print = (v: unknown) => out.write(`${JSON.stringify(v, null, 2)}\n`);
  const need = async (): Promise<KeyRecord | number> => {
    if (!apiKey) {
      process.stderr.write(`keygate keys ${action}: an <apiKey> argument is required\n`);
      return 2;
    }
    const r = await store.getKey(apiKey);
    if (!r) {
      process.stderr.write(`keygate keys ${action}: no key ${JSON.stringify(apiKey)}\n`);
      return 1;
    }
    return r;
  };
  switch (action) {
    case 'create': {
      const material = generateKeyMaterial();
      const { record, errors } = parseKeyRecord(
        {
          apiKey: material.apiKey,
          apiSecret: material.secret,
          id: material.id,
          scopes: list(values.scopes),
          allowIps: list(values['allow-ip']),
          label: values.label,
          createdAt: new Date().toISOString(),
        },
        'key',
      );
      if (!record) {
        process.stderr.write(`keygate keys create:\n  - ${errors.join('\n  - ')}\n`);
        return 2;
      }
      await store.putKey(record);
      const shown = { apiKey: record.apiKey, apiSecret: record.secret, id: record.id, scopes: record.scopes, allowIps: record.allowIps, ...(record.label && { label: record.label }) };
      if (values.json) print(shown);
      else out.write(`Created key ${record.id}\n  apiKey:    ${record.apiKey}\n  apiSecret: ${record.secret}\n  scopes:    ${record.scopes.join(',') || '(none)'}\n  allowIps:  ${record.allowIps.join(',') || '(any)'}\nThe secret is shown only now; store it safely.\n`);
      return 0;
    }
    case 'list': {
      const all = (await store.listKeys()).filter((r) => !values.state || r.state === values.state).map(publicView);
      if (values.json) print(all);
      else {
        out.write(`${['API KEY', 'ID', 'STATE', 'SCOPES', 'ALLOW IPS', 'LABEL'].join('\t')}\n`);
        for (const r of all) out.write(`${[r.apiKey, r.id, r.state, r.scopes.join(',') || '-', r.allowIps.join(',') || '-', r.label ?? ''].join('\t')}\n`);
      }
      return 0;
    }
    case 'show': {
      const r = await need();
      if (typeof r === 'number') return r;
      print(publicView(r));
      return 0;
    }
    case 'revoke': {
      const r = await need();
      if (typeof r === 'number') return r;
      await store.putKey({ ...r, state: 'revoked', revokedAt: new Date().toISOString(), ...(values.reason && { revokeReason: values.reason }) });
      out.write(`revoked ${r.apiKey} (${r.id})\n`);
      return 0;
    }
    case 'delete': {
      const r = await need();
      if (typeof r === 'number') return r;
      await store.deleteKey(r.apiKey);
      out.write(`deleted ${r.apiKey} (${r.id})\n`);
      return 0;
    }
    default:
      process.stderr.write(`keygate keys: unknown action ${JSON.stringify(action)}\n\n${HELP}`);
      return 2;
  }
}

