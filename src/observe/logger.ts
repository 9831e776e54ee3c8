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

export function boundedDestination(options: { fd?: number; maxBytes?: number; onFirstDrop?: () => void } = {}): DestinationStream {
  const maxBytes = options.maxBytes ?? LOG_BUFFER_MAX_BYTES;
  const dest = pino.destination({ fd: options.fd ?? 1, sync: false, maxLength: maxBytes });
  let warned = false;
  dest.on('drop', () => {
    if (warned) return;
    warned = true;
    (options.onFirstDrop ?? (() => process.stderr.write(`keygate: stdout is not keeping up; log lines beyond ${maxBytes} buffered bytes are being dropped\n`)))();
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
