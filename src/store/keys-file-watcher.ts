import { watch, type FSWatcher } from 'node:fs';
import { basename, dirname } from 'node:path';
import type { Logger } from 'pino';
import type { KeyRecord } from './key-record.js';
import { KeysFileError, loadKeysFile } from './keys-file.js';

export interface KeysFileWatcher {
  /** Reads the file now; on success swaps the whole key set at once, otherwise keeps the last good set. */
  reload(cause: string): boolean;
  close(): void;
}

/**
 * Embedded mode: reloads the keys file when it changes (watching its folder,
 * so editors that write-and-rename are seen) and when asked (SIGHUP). The
 * swap is one synchronous step, so no request sees a half-loaded set; a broken
 * file is logged and the last good set stays in force.
 */
export function createKeysFileWatcher(
  options: { file: string; debounceMs?: number },
  deps: { logger: Logger; apply: (records: KeyRecord[]) => void },
): KeysFileWatcher {
  let timer: NodeJS.Timeout | undefined;
  let watcher: FSWatcher | undefined;
  const name = basename(options.file);

  const reload = (cause: string): boolean => {
    try {
      const records = loadKeysFile(options.file);
      deps.apply(records);
      deps.logger.info({ file: options.file, keys: records.length, cause }, 'keys file loaded');
      return true;
    } catch (err) {
      const problems = err instanceof KeysFileError ? err.problems : [(err as Error).message];
      deps.logger.error({ file: options.file, cause, problems }, 'keys file rejected; keeping the last good set');
      return false;
    }
  };

  try {
    watcher = watch(dirname(options.file), (_event, changed) => {
      if (changed !== null && changed !== name) return;
      clearTimeout(timer);
      timer = setTimeout(() => reload('file changed'), options.debounceMs ?? 100);
    });
    watcher.on('error', (err) => deps.logger.warn({ err: err.message }, 'keys file watch failed; SIGHUP still reloads'));
  } catch (err) {
    deps.logger.warn({ err: (err as Error).message }, 'cannot watch the keys file; SIGHUP still reloads');
  }

  return {
    reload,
    close() {
      clearTimeout(timer);
      watcher?.close();
    },
  };
}
