// Tested in test/unit/keys-actions.test.ts, test/unit/keys-transfer.test.ts (each action through main()).
import type { HomeRules } from '../../operations/homes.js';
import type { KeyRecord } from '../../keys/key-record.js';
import { escapeUnprintable } from '../../keys/printable-text.js';
import { createKeyOperations, type KeyOperations } from '../../operations/key-operations.js';
import type { Done } from '../../operations/outcome.js';
import { createOwnerOperations, type CostliestRoute, type OwnerOperations } from '../../operations/owner-operations.js';
import type { AuditEntry, Store } from '../../store/store.js';
import { CliError, KeyNotFound } from '../cli-errors.js';
import type { CommandSpec, OptionSpec, Parsed } from '../command-line.js';
import { createProgress, type Progress } from './progress.js';

/**
 * What every `keygate keys` action works with. Changes go through
 * createKeyOperations, the code path the management API uses too: one
 * validation, one compare-and-set write (published to every instance) with its audit entry.
 */
export interface KeyContext {
  readonly ops: KeyOperations;
  /** `keygate owners`: the owners' settings, the code path PUT /v1/owners/{owner} takes too. */
  readonly owners: OwnerOperations;
  /** For reads the operations do not cover (usage counters). */
  readonly store: Store;
  readonly actor: string;
  readonly now: () => number;
  readonly out: NodeJS.WritableStream;
  readonly err: NodeJS.WritableStream;
  /** True when secrets are sealed at rest. */
  readonly encrypted: boolean;
  /** The key, or KeyNotFound. */
  load(apiKey: string): Promise<KeyRecord>;
  /** An operation's value, or its refusal thrown: not found → KeyNotFound (exit 1), invalid → exit 2, conflict → exit 1. */
  must<T>(result: Done<T>, apiKey?: string): T;
  /** The audit log line alone, for what changes no key (an export). */
  audit(entry: AuditEntry): void;
  /** Pretty JSON on stdout. */
  print(value: unknown): void;
  /** A progress line on stderr, drawn only when stderr is a terminal (progress.ts). */
  progress(label: string, total?: number): Progress;
}

/** Every key action takes --json. */
/** An option with a value (`value` names it in help), or a boolean flag when `value` is undefined. */
export const opt = (name: string, value: string | undefined, help: string): OptionSpec =>
  value === undefined ? { name, type: 'boolean', help } : { name, type: 'string', value, help };

/** The <apiKey> argument of the actions on one key. */
export const apiKeyOf = (p: Parsed) => p.args[0] as string;

export const JSON_OPTION: OptionSpec = { name: 'json', type: 'boolean', help: 'print JSON' };

/** One row of the keys table: its command line, and what it does with a context. */
export interface KeyAction {
  readonly spec: CommandSpec;
  run(ctx: KeyContext, parsed: Parsed): Promise<void>;
}

export interface KeyContextDeps {
  store: Store;
  now: () => number;
  actor: string;
  audit: (entry: AuditEntry) => void;
  out: NodeJS.WritableStream;
  err: NodeJS.WritableStream;
  encrypted: boolean;
  /** The policy's costliest route (the file `keygate serve` would read), for `owners set`'s warning. */
  costliestRoute?: () => CostliestRoute | undefined;
  secretPrefix?: string | undefined;
  /** Regions, from the policy file and KEYGATE_REGION (keys-command.ts); undefined = off. */
  regions?: HomeRules | undefined;
}

export function createKeyContext(deps: KeyContextDeps): KeyContext {
  const ops = createKeyOperations({
    store: deps.store,
    now: deps.now,
    audit: deps.audit,
    secretPrefix: deps.secretPrefix,
    regions: deps.regions,
  });
  const must = <T>(r: Done<T>, apiKey = ''): T => {
    if (r.ok) return r.value;
    if (r.refused === 'not_found') throw new KeyNotFound(apiKey);
    if (r.refused === 'invalid') throw new CliError(`\n  - ${r.problems.join('\n  - ')}`, 2);
    throw new CliError(r.message, 1);
  };
  return {
    ops,
    owners: createOwnerOperations({
      store: deps.store,
      now: deps.now,
      audit: deps.audit,
      ...(deps.costliestRoute && { costliestRoute: deps.costliestRoute }),
      regions: deps.regions,
    }),
    store: deps.store,
    actor: deps.actor,
    now: deps.now,
    out: deps.out,
    err: deps.err,
    encrypted: deps.encrypted,
    must,
    load: async (apiKey) => must(await ops.get(apiKey), apiKey),
    audit: deps.audit,
    progress: (label, total) =>
      createProgress({ label, ...(total !== undefined && { total }) }, { stream: deps.err, now: deps.now }),
    // JSON escapes C0 inside strings itself (the raw newlines are its layout); DEL, C1 and bidi
    // overrides in a stored label would reach the terminal raw.
    print: (value) =>
      deps.out.write(`${JSON.stringify(value, null, 2).split('\n').map(escapeUnprintable).join('\n')}\n`),
  };
}

/**
 * One line on stderr when `count` secrets were just stored in plain form (no KEYGATE_SECRET_ENCRYPTION_KEY):
 * anyone who can read the Redis (a dump, a replica, a backup) can sign as those keys.
 */
export function warnPlainSecrets(ctx: Pick<KeyContext, 'encrypted' | 'err'>, count: number): void {
  if (ctx.encrypted || count === 0) return;
  ctx.err.write(
    `warning: ${count === 1 ? 'the secret was' : `${count} secrets were`} stored unencrypted: ` +
      'set KEYGATE_SECRET_ENCRYPTION_KEY (or _FILE) to seal secrets at rest (docs/security.md)\n',
  );
}
