// Tested in test/unit/keys-actions.test.ts (main() with a captured terminal), test/process/cli.test.ts.
import type { Store } from '../store/store.js';

/** The key store `keygate keys` works on, and whether its secrets are sealed at rest. */
export interface KeyStoreHandle {
  readonly store: Store;
  readonly encrypted: boolean;
  /** KEYGATE_SECRET_PREFIX, as `keygate serve` reads it: the prefix of the secrets create and rotate issue. */
  readonly secretPrefix?: string | undefined;
}

/**
 * Everything a command touches outside its arguments. bin/keygate.js passes
 * the process's own; tests pass streams they read and a memory store, so a
 * command runs in-process.
 */
export interface CliIo {
  readonly out: NodeJS.WritableStream;
  readonly err: NodeJS.WritableStream;
  readonly env: NodeJS.ProcessEnv;
  readonly stdin: NodeJS.ReadableStream;
  /** Connects to the store `keygate keys` manages (Redis, from `env`); throws a CliError when none is configured. */
  readonly openKeyStore: (env: NodeJS.ProcessEnv) => Promise<KeyStoreHandle>;
}
