// Tested in test/e2e/yaml-off-thread.test.ts (the worker it starts).
import { workerData } from 'node:worker_threads';
import { DataFileSyntaxError, parseYamlText } from './read-data-file.js';
import type { YamlWorkerAnswer, YamlWorkerData } from './yaml-off-thread.js';

/** Worker thread entry (see yaml-off-thread.ts): parses the text with `yaml`, answers once, raises the flag. */
const { text, port, answered } = workerData as YamlWorkerData;
let answer: YamlWorkerAnswer;
try {
  answer = { ok: true, data: parseYamlText(text) };
} catch (err) {
  answer =
    err instanceof DataFileSyntaxError
      ? {
          ok: false,
          ...(err.line !== undefined && { line: err.line }),
          ...(err.column !== undefined && { column: err.column }),
          ...(err.kind !== undefined && { kind: err.kind }),
          message: err.message,
        }
      : { ok: false, message: (err as Error).message };
}
port.postMessage(answer);
Atomics.store(answered, 0, 1);
Atomics.notify(answered, 0);
port.close();
