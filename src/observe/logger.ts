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

export function createLogger(options: { level: string }, destination?: DestinationStream): Logger {
  return pino(
    {
      name: 'keygate',
      level: options.level,
      redact: { paths: REDACT_PATHS, censor: '[redacted]' },
      base: { pid: process.pid },
    },
    destination ?? pino.destination({ sync: false }),
  );
}
