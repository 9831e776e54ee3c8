import type { Logger } from 'pino';
import { createFileReloader, type FileReloader } from '../files/file-reloader.js';
import type { KeyRecord } from './key-record.js';
import { loadKeysFile } from './keys-file.js';

export type KeysFileSource = FileReloader;

/**
 * Embedded mode: reloads the keys file when it changes (edits, saves by
 * rename, symlink and Kubernetes `..data` swaps: see files/file-reloader.ts) and when
 * asked (SIGHUP). The swap is one synchronous step, so no request sees a
 * half-loaded set; a broken file is logged and the last good set stays in force.
 */
export function createKeysFileSource(
  options: { file: string; debounceMs?: number },
  deps: { logger: Logger; apply: (records: KeyRecord[]) => void },
): KeysFileSource {
  return createFileReloader(
    {
      file: options.file,
      what: 'keys file',
      kept: 'set',
      ...(options.debounceMs !== undefined && { debounceMs: options.debounceMs }),
    },
    { logger: deps.logger, load: loadKeysFile, apply: deps.apply, describe: (records) => ({ keys: records.length }) },
  );
}
