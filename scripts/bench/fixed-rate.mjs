// @ts-check
// Open-loop load at a fixed rate: sends RATE requests per second for SECONDS,
// each with the next token from TOKENS_FILE, and prints one JSON line with
// what it sent and got. Used by bench-ab.mjs to compare CPU per request at
// the same offered load (below saturation), which is steadier than req/s.
//
//   node fixed-rate.mjs <base-url> <rate> <seconds> <tokens-file> [path] [method] [body-file]
// With a body file every request sends its bytes (with a Content-Length), e.g. POST.
import { readFileSync } from 'node:fs';
import { Agent, request } from 'node:http';

const [base, rateArg, secondsArg, tokensFile, path = '/api/v3/viewer/accounts', method = 'GET', bodyFile] =
  process.argv.slice(2);
const body = bodyFile === undefined ? undefined : readFileSync(bodyFile);
if (!base || !tokensFile) {
  process.stderr.write('usage: node fixed-rate.mjs <base-url> <rate> <seconds> <tokens-file> [path]\n');
  process.exit(2);
}
const rate = Number(rateArg);
const total = Math.round(rate * Number(secondsArg));
const tokens = readFileSync(tokensFile, 'utf8').trim().split('\n');
if (tokens.length < total)
  throw new Error(`fixed-rate: ${total} requests need ${total} tokens, the file has ${tokens.length}`);
const url = new URL(path, base);
const agent = new Agent({ keepAlive: true, maxSockets: 64 });

let sent = 0;
let done = 0;
let non2xx = 0;
let errors = 0;
let late = 0;
/** Answers other than 2xx by status, so a failed run says what it got. @type {Record<number, number>} */
const statuses = {};
const started = performance.now();

function finish() {
  done++;
  if (done === total) {
    const seconds = (performance.now() - started) / 1000;
    process.stdout.write(`${JSON.stringify({ requests: done, non2xx, errors, late, seconds, statuses })}\n`);
    agent.destroy();
  }
}

function send() {
  const req = request(
    {
      agent,
      host: url.hostname,
      port: url.port,
      method,
      path: url.pathname + url.search,
      headers: {
        authorization: `Bearer ${tokens[sent++]}`,
        ...(body && { 'content-type': 'application/json', 'content-length': String(body.length) }),
      },
    },
    (res) => {
      if (!res.statusCode || res.statusCode < 200 || res.statusCode > 299) {
        non2xx++;
        statuses[res.statusCode ?? 0] = (statuses[res.statusCode ?? 0] ?? 0) + 1;
      }
      res.resume();
      res.on('end', finish);
    },
  );
  req.on('error', () => {
    errors++;
    finish();
  });
  req.end(body);
}

const timer = setInterval(() => {
  const due = Math.min(total, Math.floor(((performance.now() - started) / 1000) * rate));
  // More than 50 ms behind schedule: the target (or this process) cannot keep the rate.
  if (due - sent > rate / 20) late++;
  while (sent < due) send();
  if (sent >= total) clearInterval(timer);
}, 2);
