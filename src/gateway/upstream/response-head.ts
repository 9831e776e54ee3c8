// Tested in test/unit/response-head.test.ts, test/unit/upstream-exchange.test.ts, test/adversarial/bodiless-responses.test.ts.
// Hop-by-hop response headers: they describe the upstream connection, not the response.
const HOP_BY_HOP: ReadonlySet<string> = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'transfer-encoding',
  'upgrade',
  'trailer',
  'te',
]);

/** A Connection value that names only `keep-alive` and/or `close` (any case, spaces, commas). */
const ONLY_HOP_BY_HOP = /^[\t ,]*(?:keep-alive|close)(?:[\t ]*,[\t ,]*(?:keep-alive|close))*[\t ,]*$/i;

/**
 * The upstream's end-to-end response headers as a flat [name, value, …] list
 * for `res.writeHead`: hop-by-hop headers and any header the upstream names in
 * Connection are left out, so connection management and framing stay with
 * Node's server (the client's own `Connection: close` is honoured and the
 * upstream's keep-alive settings never leak). Repeated headers (Set-Cookie)
 * stay repeated; names keep the upstream's spelling. X-Request-Id is added
 * when the upstream did not send one. A 204 loses any Content-Length: RFC 9110
 * §8.6 forbids it there (a 304 and an answer to HEAD keep theirs, which name
 * the length a 200 / GET would have had).
 */
export function responseHead(raw: readonly Buffer[], requestId: string, status = 200): string[] {
  const out: string[] = [];
  let connection: string | undefined;
  let hasRequestId = false;
  for (let i = 0; i < raw.length; i += 2) {
    const name = latin1(raw[i] as Buffer);
    const value = latin1(raw[i + 1] as Buffer);
    // Only names up to 17 characters can be in the set or be X-Request-Id.
    const lower = name.length <= 17 ? lowerName(name) : name;
    if (HOP_BY_HOP.has(lower) || (status === 204 && lower === 'content-length')) {
      if (lower === 'connection') connection = connection === undefined ? value : `${connection},${value}`;
      continue;
    }
    if (lower === 'x-request-id') hasRequestId = true;
    out.push(name, value);
  }
  if (connection !== undefined) dropNamed(out, connection);
  if (!hasRequestId) out.push('x-request-id', requestId);
  return out;
}

/** Header names and values up to this many bytes are looked up in the table below. */
const INTERNED_MAX = 64;
/** A power of two. */
const INTERNED_SLOTS = 256;
/**
 * Header strings by their bytes. An upstream's names and most of its values repeat from one response
 * to the next (Content-Type, Content-Length, Connection, Keep-Alive, and Date within its second), so a
 * response reuses the string the last equal bytes made instead of decoding a new one per header. A
 * string is handed out only when its bytes equal the header's exactly; a slot holds the latest
 * string hashed there. Process-wide and bounded (256 strings of at most 64 characters): it holds
 * nothing but header text, which every response of every request may share.
 */
const interned: (string | undefined)[] = new Array<string | undefined>(INTERNED_SLOTS).fill(undefined);

/** The header's bytes as a latin1 string (what undici's raw headers are), from the table when it has them. */
function latin1(bytes: Buffer): string {
  const n = bytes.length;
  if (n === 0 || n > INTERNED_MAX) return bytes.toString('latin1');
  let h = n;
  for (let i = 0; i < n; i++) h = (Math.imul(h, 31) + (bytes[i] as number)) | 0;
  const slot = h & (INTERNED_SLOTS - 1);
  const known = interned[slot];
  if (known !== undefined && known.length === n) {
    let i = 0;
    while (i < n && known.charCodeAt(i) === bytes[i]) i++;
    if (i === n) return known;
  }
  const fresh = bytes.toString('latin1');
  interned[slot] = fresh;
  return fresh;
}

/**
 * A header name in lower case, from a bounded table keyed by the name's string: the names come from the
 * interned table above, the same string response after response, so the usual response lowers each of
 * its names once for the process instead of making a new string per header per response.
 */
const lowered = new Map<string, string>();
function lowerName(name: string): string {
  let lower = lowered.get(name);
  if (lower === undefined) {
    lower = name.toLowerCase();
    if (lowered.size >= INTERNED_SLOTS) lowered.clear();
    lowered.set(name, lower);
  }
  return lower;
}

/** Removes, in place, every header the upstream named in Connection (other than the fixed hop-by-hop set, already gone). */
function dropNamed(out: string[], connection: string): void {
  // The usual value names only a hop-by-hop header already left out: nothing to build or remove.
  if (ONLY_HOP_BY_HOP.test(connection)) return;
  const named = new Set<string>();
  for (const token of connection.split(',')) named.add(token.trim().toLowerCase());
  let w = 0;
  for (let r = 0; r < out.length; r += 2) {
    if (named.has((out[r] as string).toLowerCase())) continue;
    out[w++] = out[r] as string;
    out[w++] = out[r + 1] as string;
  }
  out.length = w;
}

/**
 * RFC 9110 §6.4.1: an answer to HEAD, a 204 and a 304 have no content whatever
 * framing header they carry, so the response is complete once its head is.
 */
export function hasNoContent(method: string | undefined, status: number): boolean {
  return status === 204 || status === 304 || method === 'HEAD';
}
