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

/** The only fields a request line may carry (RequestLog in request-record.ts); anything else is left out. */
export const REQUEST_LINE_FIELDS = Object.freeze([
  'requestId',
  'method',
  'route',
  'clientIp',
  'keyId',
  'code',
  'reason',
  'status',
  'authMs',
  'upstreamMs',
  'upstreamCause',
  'durationMs',
  'aborted',
  'parserError',
] as const);
type RequestLineField = (typeof REQUEST_LINE_FIELDS)[number];
/** A string JSON writes as is between quotes (printable ASCII but `"` and `\`): most values, no escaping pass. */
const PLAIN_STRING = /^[\x20\x21\x23-\x5b\x5d-\x7e]*$/;

/** One field as pino writes it (`,"name":value`), or nothing when absent or of a type a line never carries. */
function field(prefix: string, value: unknown): string {
  if (typeof value === 'string')
    return PLAIN_STRING.test(value) ? `${prefix}"${value}"` : prefix + JSON.stringify(value);
  if (typeof value === 'number') return Number.isFinite(value) ? prefix + value : `${prefix}null`;
  if (typeof value === 'boolean') return prefix + value;
  return '';
}

export interface RequestLogger {
  /** Writes one request line at `info`, or at `warn` when Keygate itself failed the request. */
  (line: object, warn: boolean): void;
}

/**
 * The one line per request, written straight to the logger's destination in
 * exactly the format pino writes (level, time, the logger's bindings, the
 * fields, msg), with the logger's level respected. Its fields come from a
 * fixed allow-list of strings, numbers and booleans, so a fixed serializer
 * does what pino's generic one and its redaction would, at a fraction of the
 * cost: pino's path cost about 7 µs of CPU per forwarded request in the
 * benchmark. Strings go through JSON.stringify, so nothing a client sent can
 * break out of its field.
 */
export function createRequestLogger(logger: Logger): RequestLogger {
  const stream = (logger as unknown as Record<symbol, LineStream>)[pino.symbols.streamSym] as LineStream;
  const time = (logger as unknown as Record<symbol, () => string>)[pino.symbols.timeSym] as () => string;
  const bindings = (logger as unknown as Record<symbol, string>)[pino.symbols.chindingsSym] as string;
  const info = logger.levels.values.info as number;
  const warnLevel = logger.levels.values.warn as number;
  const write = batchedWrite(stream);
  return (line, warn) => {
    const level = warn ? warnLevel : info;
    if (level < logger.levelVal) return;
    // The allow-list's fields read one by one in its order (no walk of the object's keys, no lookups).
    const l = line as Partial<Record<RequestLineField, unknown>>;
    const out =
      `{"level":${level}${time()}${bindings}` +
      field(',"requestId":', l.requestId) +
      field(',"method":', l.method) +
      field(',"route":', l.route) +
      field(',"clientIp":', l.clientIp) +
      field(',"keyId":', l.keyId) +
      field(',"code":', l.code) +
      field(',"reason":', l.reason) +
      field(',"status":', l.status) +
      field(',"authMs":', l.authMs) +
      field(',"upstreamMs":', l.upstreamMs) +
      field(',"upstreamCause":', l.upstreamCause) +
      field(',"durationMs":', l.durationMs) +
      field(',"aborted":', l.aborted) +
      field(',"parserError":', l.parserError);
    write(`${out},"msg":"request"}\n`);
  };
}

/** Request lines are handed to the destination in batches this large (or every LOG_FLUSH_INTERVAL_MS). */
const REQUEST_BATCH_BYTES = 32 * 1024;

interface LineStream {
  write(s: string): void;
  flush?: (...args: unknown[]) => unknown;
  flushSync?: () => unknown;
}

/**
 * Request lines handed to Keygate's own destination (boundedDestination: pino's sonic-boom) in
 * batches of REQUEST_BATCH_BYTES, not one by one. sonic-boom measures the UTF-8 length of its pending
 * buffer on every write (`Buffer.byteLength` of a string grown by `+=`, which flattens and scans
 * it): with up to 8 KB pending that cost about 4 µs of CPU per request line at `info`
 * (docs/performance.md), where a write of a whole batch pays it once. Lines wait at most
 * LOG_FLUSH_INTERVAL_MS here (as they already did in the destination), and the destination's
 * `flush` and `flushSync` (logger.flush() at shutdown, pino's at exit) first take what waits here,
 * so no line is lost; a line pino writes first takes them too, so every line keeps its place. Another stream (a test's) gets each line
 * as it is written.
 */
function batchedWrite(stream: LineStream): (line: string) => void {
  // One batch per destination, however many request loggers write to it (the request path's and the
  // upgrade path's): two batches would each go out on their own timer, out of order with each other.
  // Kept on the destination itself, under a symbol no other code reads.
  const carrier = stream as LineStream & { [BATCH]?: (line: string) => void };
  return (carrier[BATCH] ??= newBatch(stream));
}
const BATCH = Symbol('requestLineBatch');

function newBatch(stream: LineStream): (line: string) => void {
  const flushSync = stream.flushSync;
  const flush = stream.flush;
  if (typeof flushSync !== 'function' || typeof flush !== 'function') return (line) => stream.write(line);
  const direct = stream.write;
  let pending = '';
  let pendingBytes = 0;
  let timer: NodeJS.Timeout | undefined;
  /** What waits here, taken now (and the timer stopped): '' when nothing does. */
  const take = () => {
    if (timer !== undefined) clearTimeout(timer);
    timer = undefined;
    const batch = pending;
    pending = '';
    pendingBytes = 0;
    return batch;
  };
  const drain = () => {
    const batch = take();
    if (batch !== '') direct.call(stream, batch);
  };
  // Every other line the logger writes (pino's own) goes out after the request lines written before
  // it, in the same write: the output's order is the order things were logged in (an error line after
  // the requests that led to it, not 100 ms before them).
  stream.write = function (this: unknown, s: string) {
    return direct.call(this, pending === '' ? s : take() + s);
  };
  stream.flushSync = function (this: unknown) {
    drain();
    return flushSync.call(this);
  };
  stream.flush = function (this: unknown, ...args: unknown[]) {
    drain();
    return flush.apply(this, args);
  };
  return (line) => {
    pending += line;
    // Characters, not bytes: the line is ASCII but for a rare escaped value, and this only decides
    // when a batch is big enough (measuring bytes would flatten the line into one more copy).
    pendingBytes += line.length;
    if (pendingBytes >= REQUEST_BATCH_BYTES) drain();
    else if (timer === undefined) timer = setTimeout(drain, LOG_FLUSH_INTERVAL_MS).unref();
  };
}
