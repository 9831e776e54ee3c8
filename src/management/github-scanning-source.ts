// Tested in test/e2e/secret-scanning.test.ts, test/unit/github-scanning.test.ts.
import type { Logger } from 'pino';
import { createFileReloader, type FileReloader } from '../files/file-reloader.js';
import { loadGithubScanningKeys, type GithubScanningKey } from '../files/github-scanning-keys.js';

export interface GithubScanningKeysSource extends FileReloader {
  /** The keys in force: the last good file's. */
  keys(): readonly GithubScanningKey[];
}

/**
 * KEYGATE_GITHUB_SCANNING_KEYS_FILE, read at start (a broken file stops the start) and reloaded on
 * change and on SIGHUP through the one file reloader, like every file Keygate reads. A broken file on
 * reload is logged and the last good keys stay in force. GitHub rotates its keys by adding one
 * (`is_current`) beside the old: refresh the file from its API and both verify until the old is dropped.
 */
export function createGithubScanningKeysSource(
  options: { file: string; debounceMs?: number },
  deps: { logger: Logger },
): GithubScanningKeysSource {
  let current: readonly GithubScanningKey[] = loadGithubScanningKeys(options.file);
  const reloader = createFileReloader(
    {
      file: options.file,
      what: 'GitHub secret scanning keys file',
      kept: 'keys',
      ...(options.debounceMs !== undefined && { debounceMs: options.debounceMs }),
    },
    {
      logger: deps.logger,
      load: loadGithubScanningKeys,
      apply: (keys) => (current = keys),
      describe: (keys) => ({ keys: keys.length }),
    },
  );
  return { keys: () => current, reload: (cause) => reloader.reload(cause), close: () => reloader.close() };
}
