// Tested in test/unit/request-logger.test.ts, test/e2e/logging.test.ts, test/process/log-backpressure.test.ts.
import pino, { type DestinationStream, type Logger } from 'pino';

/**
 * Paths redacted wherever they appear in a log object. Keygate never logs
 * request headers or key records, so these are a second line of defence.
 */
export const REDACT_PATHS = [
  'authorization',
  'token',
  'secret',
  'apiSecret',
  '*.authorization',
  '*.token',
  '*.secret',
  '*.apiSecret',
  'headers.authorization',
  'req.headers.authorization',
  'config.redisUrl',
];

/**
 * Unwritten log output kept in memory at most. When stdout cannot keep up (a
 * stalled log shipper, a full pipe), further lines are dropped instead of
 * growing the heap without bound; a notice goes to stderr once.
 */
export const LOG_BUFFER_MAX_BYTES = 16 * 1024 * 1024;

/**
 * Lines are written in batches: once this many bytes are pending, or every
 * LOG_FLUSH_INTERVAL_MS, whichever comes first, and at exit (pino flushes its
 * destination on process exit). One write per line cost a syscall and a
 * thread-pool round trip per request.
 */
export const LOG_BATCH_BYTES = 8 * 1024;
export const LOG_FLUSH_INTERVAL_MS = 100;

export interface DestinationOptions {
  readonly fd?: number;
  readonly maxBytes?: number;
  /** 0 writes each line as soon as possible. */
  readonly batchBytes?: number;
  readonly flushIntervalMs?: number;
  readonly onFirstDrop?: () => void;
}

export function boundedDestination(options: DestinationOptions = {}): DestinationStream {
  const maxBytes = options.maxBytes ?? LOG_BUFFER_MAX_BYTES;
  const dest = pino.destination({
    fd: options.fd ?? 1,
    sync: false,
    maxLength: maxBytes,
    minLength: options.batchBytes ?? LOG_BATCH_BYTES,
    periodicFlush: options.flushIntervalMs ?? LOG_FLUSH_INTERVAL_MS,
  });
  let warned = false;
  dest.on('drop', () => {
    if (warned) return;
    warned = true;
    (
      options.onFirstDrop ??
      (() =>
        process.stderr.write(
          `keygate: stdout is not keeping up; log lines beyond ${maxBytes} buffered bytes are being dropped\n`,
        ))
    )();
  });
  return dest;
}

export function createLogger(options: { level: string }, destination?: DestinationStream): Logger {
  return pino(
    {
      name: 'keygate',
      level: options.level,
      redact: { paths: REDACT_PATHS, censor: '[redacted]' },
      base: { pid: process.pid },
    },
    destination ?? boundedDestination(),
  );
}
