// Tested in test/e2e/keys-file-reload.test.ts.
import { statSync } from 'node:fs';
import type { Logger } from 'pino';
import { createAsyncFileReloader, type AsyncFileReloader } from '../files/file-reloader.js';
import { loadKeysOffThread } from './load-keys-off-thread.js';
import type { KeyRecord } from './key-record.js';
import { loadKeysFileWithOwners } from './keys-file.js';
import type { OwnerRecord } from './owner-record.js';

/**
 * Files smaller than this load on the event loop: about 2,000 keys parse in a few milliseconds, less
 * than a worker thread takes to start and load the parser and schema (seconds on a busy machine).
 */
const OFF_THREAD_BYTES = 256 * 1024;

function sizeOf(file: string): number {
  try {
    return statSync(file).size;
  } catch {
    return 0; // missing: the load below reports it
  }
}

export type KeysFileSource = AsyncFileReloader;

/** A key set being built beside the one in force (MemoryStore.stageKeys); structural, so keys/ needs nothing of store/. */
export interface KeySetStaging {
  add(records: readonly KeyRecord[]): void;
  /** The file's `owners:`, put in force with the keys. */
  setOwners(owners: readonly OwnerRecord[]): void;
  scan(): Promise<void> | void;
  commit(): void;
  abandon(): void;
}

/**
 * Embedded mode: reloads the keys file when it changes (edits, saves by rename, symlink and
 * Kubernetes `..data` swaps: see files/file-reloader.ts) and when asked (SIGHUP). Reading,
 * parsing and validating a large file run on a worker thread (load-keys-off-thread.ts); the records come
 * back in batches into a new set built beside the live one, which keeps serving; the swap is
 * one synchronous step, so no request sees a half-loaded set, and only the keys whose record
 * changed are announced (their cache entries dropped). A broken file is logged and the last
 * good set stays in force.
 */
export function createKeysFileSource(
  options: { file: string; debounceMs?: number },
  deps: { logger: Logger; stage: () => KeySetStaging },
): KeysFileSource {
  let cancel = new AbortController();
  const reloader = createAsyncFileReloader(
    {
      file: options.file,
      what: 'keys file',
      kept: 'set',
      ...(options.debounceMs !== undefined && { debounceMs: options.debounceMs }),
    },
    {
      logger: deps.logger,
      load: async (file: string) => {
        const staged = deps.stage();
        try {
          let count: number;
          if (sizeOf(file) < OFF_THREAD_BYTES) {
            const { records, owners } = loadKeysFileWithOwners(file);
            staged.add(records);
            staged.setOwners(owners);
            count = records.length;
          } else
            count = await loadKeysOffThread(
              file,
              (batch) => staged.add(batch),
              cancel.signal,
              (owners) => staged.setOwners(owners),
            );
          await staged.scan();
          return { staged, count };
        } catch (err) {
          staged.abandon();
          throw err;
        }
      },
      apply: ({ staged }) => staged.commit(),
      describe: ({ count }) => ({ keys: count }),
    },
  );
  return {
    reload: (cause) => reloader.reload(cause),
    close() {
      cancel.abort();
      cancel = new AbortController();
      reloader.close();
    },
  };
}
