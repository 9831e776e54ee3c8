import { request as httpRequest, type Agent, type IncomingHttpHeaders, type OutgoingHttpHeaders } from 'node:http';

export interface Reply {
  status: number;
  headers: IncomingHttpHeaders;
  /** The header lines as received, [name, value, …]: repeats stay repeated. */
  rawHeaders: string[];
  body: string;
  json(): unknown;
}

/**
 * A plain HTTP request (no connection reuse unless `agent` is given); header arrays become repeated header
 * lines. `from` sends it from another local address (e.g. 127.0.0.2: a peer that is not a trusted proxy).
 */
export function send(
  base: string,
  path: string,
  options: {
    method?: string;
    headers?: OutgoingHttpHeaders;
    body?: string;
    timeoutMs?: number;
    from?: string;
    /** A keep-alive agent, for requests that must share connections (default: a fresh connection each). */
    agent?: Agent;
  } = {},
): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const url = new URL(base);
    const req = httpRequest(
      {
        host: url.hostname,
        port: url.port,
        path,
        method: options.method ?? 'GET',
        headers: options.headers,
        agent: options.agent ?? false,
        timeout: options.timeoutMs ?? 10_000,
        ...(options.from && { localAddress: options.from }),
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', reject);
        res.on('end', () => {
          const body = Buffer.concat(chunks).toString();
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            rawHeaders: res.rawHeaders,
            body,
            json: () => JSON.parse(body),
          });
        });
      },
    );
    req.on('timeout', () => req.destroy(new Error('client timeout')));
    req.on('error', reject);
    req.end(options.body);
  });
}

export const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
