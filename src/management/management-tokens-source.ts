// Tested in test/e2e/management-api.test.ts (the tokens file reloads), test/unit/management-tokens.test.ts.
import type { Logger } from 'pino';
import { createFileReloader, type FileReloader } from '../files/file-reloader.js';
import { loadManagementTokens, type ManagementToken } from '../config/management-tokens.js';

export interface ManagementTokensSource extends FileReloader {
  /** The tokens in force: the last good file's. */
  tokens(): readonly ManagementToken[];
}

/**
 * KEYGATE_MANAGEMENT_TOKENS_FILE, read at start (a broken file stops the start)
 * and reloaded like the keys and policy files: on change (files/file-reloader.ts
 * follows saves by rename, symlinks and Kubernetes `..data` swaps) and on SIGHUP.
 * A broken file on reload is logged and the last good tokens stay in force.
 */
export function createManagementTokensSource(
  options: { file: string; debounceMs?: number },
  deps: { logger: Logger },
): ManagementTokensSource {
  let current: readonly ManagementToken[] = loadManagementTokens(options.file);
  const reloader = createFileReloader(
    {
      file: options.file,
      what: 'management tokens file',
      kept: 'tokens',
      ...(options.debounceMs !== undefined && { debounceMs: options.debounceMs }),
    },
    {
      logger: deps.logger,
      load: loadManagementTokens,
      apply: (tokens) => (current = tokens),
      describe: (tokens) => ({ tokens: tokens.length }),
    },
  );
  return { tokens: () => current, reload: (cause) => reloader.reload(cause), close: () => reloader.close() };
}
