// Tested in test/e2e/yaml-off-thread.test.ts.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { MessageChannel, receiveMessageOnPort, Worker, type MessagePort } from 'node:worker_threads';

/** What the YAML worker (yaml-worker.ts) is given: the text, where to answer, and a flag to raise once it has. */
export interface YamlWorkerData {
  readonly text: string;
  readonly port: MessagePort;
  readonly answered: Int32Array;
}

/** Its answer: the data, or a syntax error located by line and column (never the text), or another failure. */
export type YamlWorkerAnswer =
  | { readonly ok: true; readonly data: unknown }
  | {
      readonly ok: false;
      readonly line?: number;
      readonly column?: number;
      readonly kind?: string;
      readonly message: string;
    };

/**
 * How long the calling thread waits for the parse before giving up on the file. The worker cannot say
 * that it died (out of memory): the wait ends here then, and the file is refused instead of the thread
 * waiting for ever. A file that takes this long to parse is far past what the fast reader or JSON handle.
 */
const MAX_WAIT_MS = 10 * 60_000;

function workerPath(): string {
  // Under the test runner this module is TypeScript source, which a worker cannot load: use the built copy.
  const beside = fileURLToPath(new URL('./yaml-worker.js', import.meta.url));
  if (existsSync(beside)) return beside;
  return fileURLToPath(new URL('../../dist/files/yaml-worker.js', import.meta.url));
}

/**
 * Parses YAML with the `yaml` package on a worker thread and waits for it (Atomics.wait: the caller
 * stays synchronous, as readDataFile is). Why: `yaml` builds a syntax tree and a document of nodes
 * several times the data's size (about 700 MB for 100,000 keys), which on the calling thread stays
 * resident after the load until the next major collection, and an idle process may not run one for
 * a long time. On a worker, that memory belongs to the worker's heap and is freed with it; only the
 * data comes back (a structured clone). Used for large files on the main thread only (read-data-file.ts).
 */
export function parseYamlOffThread(text: string): YamlWorkerAnswer {
  const answered = new Int32Array(new SharedArrayBuffer(4));
  const { port1, port2 } = new MessageChannel();
  const workerData: YamlWorkerData = { text, port: port2, answered };
  const worker = new Worker(workerPath(), { workerData, transferList: [port2] });
  try {
    if (Atomics.wait(answered, 0, 0, MAX_WAIT_MS) === 'timed-out')
      return { ok: false, message: `the YAML parser thread gave no answer within ${MAX_WAIT_MS / 60_000} minutes` };
    const got = receiveMessageOnPort(port1);
    if (!got) return { ok: false, message: 'the YAML parser thread gave no answer' };
    return got.message as YamlWorkerAnswer;
  } finally {
    port1.close();
    // Freed as a whole once it exits; not awaited (the caller is synchronous).
    void worker.terminate();
  }
}
