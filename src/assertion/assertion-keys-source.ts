// Tested in test/e2e/assertion.test.ts (rotation in three file rewrites), test/e2e/assertion-key-bounds.test.ts.
import type { Logger } from 'pino';
import { createFileReloader, type FileReloader } from '../files/file-reloader.js';
import { loadAssertionKeys, type AssertionKeySet } from './assertion-keys.js';

export interface AssertionKeysSource extends FileReloader {
  /** The keys in force: the last good file's. */
  current(): AssertionKeySet;
}

/**
 * KEYGATE_ASSERTION_KEYS_FILE, read at start (a broken file stops the start) and reloaded like the
 * other operator files (files/file-reloader.ts: on change, saves by rename, symlinks and Kubernetes
 * `..data` swaps, and SIGHUP). A file that would leave nothing to sign with is rejected and the last
 * good set stays in force, so the assertion never goes missing. Log lines name kids, never key material.
 */
export function createAssertionKeysSource(
  options: { file: string; signingKid: string | undefined; debounceMs?: number },
  deps: { logger: Logger },
): AssertionKeysSource {
  const load = (file: string) => loadAssertionKeys(file, options.signingKid);
  let current = load(options.file);
  const reloader = createFileReloader(
    {
      file: options.file,
      what: 'assertion keys file',
      kept: 'keys',
      ...(options.debounceMs !== undefined && { debounceMs: options.debounceMs }),
    },
    {
      logger: deps.logger,
      load,
      apply: (keys) => (current = keys),
      describe: (keys) => ({ keys: keys.keys.length, signingKid: keys.signing.kid }),
    },
  );
  return { current: () => current, reload: (cause) => reloader.reload(cause), close: () => reloader.close() };
}
