import type { IncomingMessage, ServerResponse } from 'node:http';

// Hop-by-hop response headers: they describe the upstream connection, not the response.
const HOP_BY_HOP: ReadonlySet<string> = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade', 'trailer', 'te']);

/**
 * Copies the upstream's status and end-to-end headers onto the client
 * response. Connection management and framing are left to Node's server, so
 * the client's own `Connection: close` is honoured and the upstream's
 * keep-alive settings never leak to the client. Repeated headers (Set-Cookie)
 * stay repeated; names keep the upstream's spelling.
 */
export function copyResponseHead(upstream: IncomingMessage, res: ServerResponse): void {
  res.statusCode = upstream.statusCode ?? 502;
  if (upstream.statusMessage) res.statusMessage = upstream.statusMessage;
  const dropped = hopByHop(upstream.headers.connection);
  // The first occurrence of a name replaces anything set so far (X-Request-Id); repeats are appended.
  const seen = new Set<string>();
  const raw = upstream.rawHeaders;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i] as string;
    const lower = name.toLowerCase();
    if (dropped.has(lower)) continue;
    if (seen.has(lower)) res.appendHeader(name, raw[i + 1] as string);
    else {
      seen.add(lower);
      res.setHeader(name, raw[i + 1] as string);
    }
  }
}

/** The fixed hop-by-hop set, plus any other header the upstream names in Connection (copied only then). */
function hopByHop(connection: string | undefined): ReadonlySet<string> {
  if (connection === undefined) return HOP_BY_HOP;
  let named: Set<string> | undefined;
  for (const token of connection.split(',')) {
    const name = token.trim().toLowerCase();
    if (!HOP_BY_HOP.has(name)) (named ??= new Set(HOP_BY_HOP)).add(name);
  }
  return named ?? HOP_BY_HOP;
}
