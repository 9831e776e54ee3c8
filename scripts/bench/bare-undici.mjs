// @ts-check
// Reference: the smallest undici forwarding hop (Pool.dispatch, head and body
// relayed, no checks, no auth). Shows what the forwarding engine alone costs.
import { createServer } from 'node:http';
import { Pool } from 'undici';

const pool = new Pool(process.env.UPSTREAM ?? '', { connections: 256, pipelining: 1 });
const server = createServer((req, res) => {
  /** @type {string[]} */
  const headers = [];
  const raw = req.rawHeaders;
  for (let i = 0; i < raw.length; i += 2) {
    const n = raw[i] ?? '';
    const v = raw[i + 1] ?? '';
    if (n.toLowerCase() !== 'connection' && n.toLowerCase() !== 'keep-alive') headers.push(n, v);
  }
  /** @type {() => void} */
  let resume = () => {};
  pool.dispatch(
    {
      method: /** @type {import('undici').Dispatcher.HttpMethod} */ (req.method),
      path: req.url ?? '/',
      headers,
      body: null,
    },
    {
      // A client that went away releases its upstream exchange: a write to its closed response
      // returns false, which would pause that pooled connection for good (the hop hung at 1,000
      // connections once wrk's timeouts had closed enough of them).
      onConnect(abort) {
        res.once('close', () => {
          if (!res.writableFinished) abort();
        });
      },
      onHeaders(status, raw, resumeUpstream) {
        resume = resumeUpstream;
        /** @type {string[]} */
        const head = [];
        for (let i = 0; i < raw.length; i += 2) {
          const n = raw[i]?.toString('latin1') ?? '';
          const v = raw[i + 1]?.toString('latin1') ?? '';
          if (n.toLowerCase() !== 'connection' && n.toLowerCase() !== 'keep-alive') head.push(n, v);
        }
        res.writeHead(status, head);
        return true;
      },
      onData(chunk) {
        // false pauses undici's socket until resume(), called once the client drains.
        if (res.destroyed) return true;
        const more = res.write(chunk);
        if (!more) res.once('drain', resume);
        return more;
      },
      onComplete() {
        res.end();
      },
      onError() {
        if (!res.headersSent) res.statusCode = 502;
        res.end();
      },
    },
  );
});
server.keepAliveTimeout = 5_000;
server.listen(Number(process.env.PORT ?? 0), '127.0.0.1', () => {
  const { port } = /** @type {import('node:net').AddressInfo} */ (server.address());
  process.stdout.write(`${JSON.stringify({ port })}\n`);
});
process.on('SIGTERM', () => process.exit(0));
