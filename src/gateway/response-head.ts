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
    const name = (raw[i] as Buffer).toString('latin1');
    const value = (raw[i + 1] as Buffer).toString('latin1');
    // Only names up to 17 characters can be in the set or be X-Request-Id.
    const lower = name.length <= 17 ? name.toLowerCase() : name;
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
