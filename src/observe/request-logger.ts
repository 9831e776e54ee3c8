// The request line: one per request, written by its own serializer straight into the logger's destination.
import pino, { type Logger } from 'pino';
import { LOG_FLUSH_INTERVAL_MS } from './logger.js';

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
  'trace_id',
  'span_id',
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
 * does what pino's generic one and its redaction would, without their work per
 * line (walking the object, checking every redacted path), which ran once per
 * forwarded request. Strings go through JSON.stringify, so nothing a client
 * sent can break out of its field.
 */
export function createRequestLogger(logger: Logger): RequestLogger {
  const stream = (logger as unknown as Record<symbol, LineStream>)[pino.symbols.streamSym] as LineStream;
  const time = (logger as unknown as Record<symbol, () => string>)[pino.symbols.timeSym] as () => string;
  const bindings = (logger as unknown as Record<symbol, string>)[pino.symbols.chindingsSym] as string;
  const epochTime = time === pino.stdTimeFunctions.epochTime;
  const info = logger.levels.values.info as number;
  const warnLevel = logger.levels.values.warn as number;
  const batch = lineBatch(stream);
  return (line, warn) => {
    const level = warn ? warnLevel : info;
    if (level < logger.levelVal) return;
    const l = line as Partial<Record<RequestLineField, unknown>>;
    // The usual line is written byte by byte into the batch, no string built (about 1.2 KB of
    // strings per line before). A value that needs escaping, a character outside ASCII or a line
    // that does not fit takes the string serializer below, which writes exactly the same bytes.
    const end = writeLine(batch.buf, batch.used, level, epochTime ? undefined : time(), bindings, l);
    if (end >= 0) batch.wrote(end);
    else batch.line(lineString(level, time(), bindings, l));
  };
}

/** One request line as a string (the general path): `{"level":…,"time":…,bindings,fields,"msg":"request"}\n`. */
function lineString(level: number, time: string, bindings: string, l: Partial<Record<RequestLineField, unknown>>) {
  // The allow-list's fields read one by one in its order (no walk of the object's keys, no lookups).
  const out =
    `{"level":${level}${time}${bindings}` +
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
    field(',"parserError":', l.parserError) +
    field(',"trace_id":', l.trace_id) +
    field(',"span_id":', l.span_id);
  return `${out},"msg":"request"}\n`;
}

/** Room kept past every variable part of a line for its fixed parts (field names, numbers, the end). */
const FIXED_ROOM = 512;
const bytesOf = (s: string) => Uint8Array.from(s, (c) => c.charCodeAt(0));
/** Each field's `,"name":`, in REQUEST_LINE_FIELDS order. */
const REQUEST_ID = bytesOf(',"requestId":');
const METHOD = bytesOf(',"method":');
const ROUTE = bytesOf(',"route":');
const CLIENT_IP = bytesOf(',"clientIp":');
const KEY_ID = bytesOf(',"keyId":');
const CODE = bytesOf(',"code":');
const REASON = bytesOf(',"reason":');
const STATUS = bytesOf(',"status":');
const AUTH_MS = bytesOf(',"authMs":');
const UPSTREAM_MS = bytesOf(',"upstreamMs":');
const UPSTREAM_CAUSE = bytesOf(',"upstreamCause":');
const DURATION_MS = bytesOf(',"durationMs":');
const ABORTED = bytesOf(',"aborted":');
const PARSER_ERROR = bytesOf(',"parserError":');
const TRACE_ID = bytesOf(',"trace_id":');
const SPAN_ID = bytesOf(',"span_id":');
const LEVEL = bytesOf('{"level":');
const TIME = bytesOf(',"time":');
const END = bytesOf(',"msg":"request"}\n');
const TRUE = bytesOf('true');
const FALSE = bytesOf('false');
const NULL = bytesOf('null');

/**
 * The same line as lineString, written into `buf` from `at`: the end offset, or -1 when it cannot be
 * written here (a string JSON would escape, a character outside ASCII, no room), leaving what it
 * wrote past `at` to be overwritten. `time` undefined: pino's default epoch time, written from Date.now().
 */
function writeLine(
  buf: Buffer,
  at: number,
  level: number,
  time: string | undefined,
  bindings: string,
  l: Partial<Record<RequestLineField, unknown>>,
): number {
  if (at + FIXED_ROOM > buf.length) return -1;
  let p = copy(buf, at, LEVEL);
  p = digits(buf, p, level);
  if (time === undefined) p = digits(buf, copy(buf, p, TIME), Date.now());
  else p = ascii(buf, p, time);
  p = ascii(buf, p, bindings);
  p = put(buf, p, REQUEST_ID, l.requestId);
  p = put(buf, p, METHOD, l.method);
  p = put(buf, p, ROUTE, l.route);
  p = put(buf, p, CLIENT_IP, l.clientIp);
  p = put(buf, p, KEY_ID, l.keyId);
  p = put(buf, p, CODE, l.code);
  p = put(buf, p, REASON, l.reason);
  p = put(buf, p, STATUS, l.status);
  p = put(buf, p, AUTH_MS, l.authMs);
  p = put(buf, p, UPSTREAM_MS, l.upstreamMs);
  p = put(buf, p, UPSTREAM_CAUSE, l.upstreamCause);
  p = put(buf, p, DURATION_MS, l.durationMs);
  p = put(buf, p, ABORTED, l.aborted);
  p = put(buf, p, PARSER_ERROR, l.parserError);
  p = put(buf, p, TRACE_ID, l.trace_id);
  p = put(buf, p, SPAN_ID, l.span_id);
  return p < 0 ? -1 : copy(buf, p, END);
}

/** One field as `field` writes it; -1 propagates. */
function put(buf: Buffer, p: number, prefix: Uint8Array, value: unknown): number {
  if (p < 0) return -1;
  if (typeof value === 'string') {
    p = copy(buf, p, prefix);
    buf[p] = 0x22;
    p = plain(buf, p + 1, value);
    if (p < 0) return -1;
    buf[p] = 0x22;
    return p + 1;
  }
  if (typeof value === 'number') {
    p = copy(buf, p, prefix);
    if (!Number.isFinite(value)) return copy(buf, p, NULL);
    return Number.isSafeInteger(value) && value >= 0 ? digits(buf, p, value) : ascii(buf, p, String(value));
  }
  if (typeof value === 'boolean') return copy(buf, copy(buf, p, prefix), value ? TRUE : FALSE);
  return p;
}

/** Fixed bytes (a field name, the end): FIXED_ROOM is kept for them. */
function copy(buf: Buffer, p: number, bytes: Uint8Array): number {
  for (let i = 0; i < bytes.length; i++) buf[p + i] = bytes[i] as number;
  return p + bytes.length;
}

/** Copies an ASCII string (a number's text, the bindings); -1 on a character outside ASCII or no room. */
function ascii(buf: Buffer, p: number, s: string): number {
  if (p < 0 || p + s.length + FIXED_ROOM > buf.length) return -1;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c > 0x7f) return -1;
    buf[p++] = c;
  }
  return p;
}

/** Copies a value JSON writes as is between quotes (PLAIN_STRING: printable ASCII but `"` and `\`); else -1. */
function plain(buf: Buffer, p: number, s: string): number {
  if (p + s.length + FIXED_ROOM > buf.length) return -1;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x20 || c > 0x7e || c === 0x22 || c === 0x5c) return -1;
    buf[p++] = c;
  }
  return p;
}

/** A non-negative safe integer in decimal, as String() writes it (at most 16 digits: within FIXED_ROOM). */
function digits(buf: Buffer, p: number, n: number): number {
  if (p < 0) return -1;
  let len = 1;
  for (let x = n; x >= 10; x = Math.floor(x / 10)) len++;
  let q = p + len;
  for (let x = n; q > p; x = Math.floor(x / 10)) buf[--q] = 0x30 + (x % 10);
  return p + len;
}

/** Request lines are handed to the destination in batches this large (or every LOG_FLUSH_INTERVAL_MS). */
const REQUEST_BATCH_BYTES = 32 * 1024;

interface LineStream {
  write(s: string): void;
  flush?: (...args: unknown[]) => unknown;
  flushSync?: () => unknown;
}

interface LineBatch {
  /** Where the next line is written, from `used`. */
  readonly buf: Buffer;
  readonly used: number;
  /** A line was written into `buf` up to `end`. */
  wrote(end: number): void;
  /** A line built as a string (the general path): after the lines before it. */
  line(s: string): void;
}

/**
 * Request lines handed to Keygate's own destination (boundedDestination: pino's sonic-boom) in
 * batches of REQUEST_BATCH_BYTES, not one by one. sonic-boom measures the UTF-8 length of its pending
 * buffer on every write (`Buffer.byteLength` of a string grown by `+=`, which flattens and scans
 * it): with up to 8 KB pending that cost about 4 µs of CPU per request line at `info`
 * (docs/performance.md), where a write of a whole batch pays it once. The batch is a buffer the
 * lines are written into (ASCII), made one string when it is handed over. Lines wait at most
 * LOG_FLUSH_INTERVAL_MS here (as they already did in the destination), and the destination's
 * `flush` and `flushSync` (logger.flush() at shutdown, pino's at exit) first take what waits here,
 * so no line is lost; a line pino writes first takes them too, so every line keeps its place. Another stream (a test's) gets each line
 * as it is written.
 */
function lineBatch(stream: LineStream): LineBatch {
  // One batch per destination, however many request loggers write to it (the request path's and the
  // upgrade path's): two batches would each go out on their own timer, out of order with each other.
  // Kept on the destination itself, under a symbol no other code reads.
  const carrier = stream as LineStream & { [BATCH]?: LineBatch };
  return (carrier[BATCH] ??= newBatch(stream));
}
const BATCH = Symbol('requestLineBatch');

function newBatch(stream: LineStream): LineBatch {
  // Room for a full batch and the line that ends it (a longer line takes the string path).
  const buf = Buffer.allocUnsafeSlow(REQUEST_BATCH_BYTES + 8 * 1024);
  const flushSync = stream.flushSync;
  const flush = stream.flush;
  if (typeof flushSync !== 'function' || typeof flush !== 'function')
    return {
      buf,
      used: 0,
      wrote: (end) => stream.write(buf.toString('latin1', 0, end)),
      line: (s) => stream.write(s),
    };
  const direct = stream.write;
  let timer: NodeJS.Timeout | undefined;
  const batch = {
    buf,
    used: 0,
    wrote(end: number) {
      batch.used = end;
      if (end >= REQUEST_BATCH_BYTES) drain();
      else if (timer === undefined) timer = setTimeout(drain, LOG_FLUSH_INTERVAL_MS).unref();
    },
    line(s: string) {
      direct.call(stream, take() + s);
    },
  };
  /** What waits here, taken now as one string (and the timer stopped): '' when nothing does. */
  const take = () => {
    if (timer !== undefined) clearTimeout(timer);
    timer = undefined;
    if (batch.used === 0) return '';
    const end = batch.used;
    batch.used = 0;
    return buf.toString('latin1', 0, end);
  };
  const drain = () => {
    const pending = take();
    if (pending !== '') direct.call(stream, pending);
  };
  // Every other line the logger writes (pino's own) goes out after the request lines written before
  // it, in the same write: the output's order is the order things were logged in (an error line after
  // the requests that led to it, not 100 ms before them).
  stream.write = function (this: unknown, s: string) {
    return direct.call(this, batch.used === 0 ? s : take() + s);
  };
  stream.flushSync = function (this: unknown) {
    drain();
    return flushSync.call(this);
  };
  stream.flush = function (this: unknown, ...args: unknown[]) {
    drain();
    return flush.apply(this, args);
  };
  return batch;
}
