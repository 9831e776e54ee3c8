// Tested in test/e2e/management-api.test.ts, test/e2e/console-browser.test.ts.
import { readFileSync, readdirSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { dirname, extname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Logger } from 'pino';
import type { Limits } from '../config/read-limits.js';
import { matchToken, type ManagementToken } from '../config/management-tokens.js';
import { MANAGEMENT_ERRORS, type ManagementError } from '../errors.js';
import type { KeyOperations } from '../operations/key-operations.js';
import type { OwnerOperations } from '../operations/owner-operations.js';
import { OWNER } from '../keys/key-record.js';
import { DurabilityError, StoreUnavailableError, type Store } from '../store/store.js';
import type { AuditReader } from '../operations/audit-reader.js';
import type { WebhookOperations } from '../operations/webhook-operations.js';
import type { GithubScanningKey } from '../files/github-scanning-keys.js';
import {
  GITHUB_SCANNING_ACTOR,
  GITHUB_SCANNING_PATH,
  handleScanningReport,
  MAX_REPORT_BYTES,
  type ScanningLabel,
} from './github-scanning.js';
import { ROUTES, type Answer, type Route } from './management-routes.js';
import { serverTimeouts } from '../config/server-timeouts.js';

export const OPENAPI_FILE = fileURLToPath(new URL('../../config/management-openapi.json', import.meta.url));
export const CONSOLE_DIR = dirname(fileURLToPath(new URL('../../console/index.html', import.meta.url)));
/** Request bodies above this are refused (413) before they are read. */
export const MAX_BODY_BYTES = 64 * 1024;

const API_KEY = /^[A-Za-z0-9_.-]{1,128}$/;
const JSON_TYPE = /^application\/json\s*(;|$)/i;
const TYPES: Readonly<Record<string, string>> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.png': 'image/png',
  '.svg': 'image/svg+xml',
};
/**
 * On every answer. The console loads only its own files (no inline script, no CDN, no framing);
 * JSON answers are never cached or sniffed; a token never leaks through a Referer.
 */
const SECURITY_HEADERS: ReadonlyArray<[string, string]> = [
  ['content-security-policy', "default-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"],
  ['x-content-type-options', 'nosniff'],
  ['referrer-policy', 'no-referrer'],
  ['cache-control', 'no-store'],
];

export interface ManagementServerDeps {
  ops: KeyOperations;
  /** Owners' own limits: /v1/owners/{owner}. */
  owners?: OwnerOperations;
  /** POST /v1/secret-scanning/github, when KEYGATE_GITHUB_SCANNING_KEYS_FILE is set: GitHub's keys in force. */
  scanning?: { keys: () => readonly GithubScanningKey[]; metrics: { count(label: ScanningLabel): void } };
  /** The audit log's reader (Redis only): GET /v1/audit. */
  audit?: AuditReader;
  /** The webhook delivery list and retry-now (Redis only): /v1/webhooks/deliveries. */
  webhooks?: WebhookOperations;
  store: Pick<Store, 'kind' | 'getUsage'>;
  /** The tokens in force (the tokens file reloads on change). */
  tokens: () => readonly ManagementToken[];
  logger: Logger;
  now: () => number;
}

interface Matched {
  route: Route;
  apiKey: string | undefined;
  owner?: string;
  event?: string;
}

/** /v1/owners/{owner}, /v1/owners/{owner}/usage. */
function matchOwner(method: string, parts: readonly string[]): Matched | 'no_route' | 'method_not_allowed' {
  if (parts.length !== 4 && parts.length !== 5) return 'no_route';
  let owner: string;
  try {
    owner = decodeURIComponent(parts[3] as string);
  } catch {
    return 'no_route';
  }
  if (!OWNER.test(owner)) return 'no_route';
  const pattern = parts.length === 5 ? `/v1/owners/{owner}/${parts[4]}` : '/v1/owners/{owner}';
  const candidates = ROUTES.filter((r) => r.pattern === pattern);
  if (candidates.length === 0) return 'no_route';
  const route = candidates.find((r) => r.method === method);
  return route ? { route, apiKey: undefined, owner } : 'method_not_allowed';
}

/** /v1/webhooks/deliveries, /v1/webhooks/deliveries/{id}/retry (the id is checked by the operation: 404). */
function matchWebhooks(method: string, parts: readonly string[]): Matched | 'no_route' | 'method_not_allowed' {
  if (parts[3] !== 'deliveries') return 'no_route';
  const retry = parts.length === 6 && parts[5] === 'retry' && parts[4] !== '';
  if (parts.length !== 4 && !retry) return 'no_route';
  const pattern = retry ? '/v1/webhooks/deliveries/{id}/retry' : '/v1/webhooks/deliveries';
  const route = ROUTES.find((r) => r.pattern === pattern && r.method === method);
  if (!route) return 'method_not_allowed';
  return retry ? { route, apiKey: undefined, event: parts[4] as string } : { route, apiKey: undefined };
}

/** /v1/keys, /v1/keys/{apiKey}, /v1/keys/{apiKey}/{action}: the route for a path and method, or why not. */
function match(method: string, path: string): Matched | 'no_route' | 'method_not_allowed' {
  const parts = path.split('/');
  if (parts[1] === 'v1' && parts[2] === 'owners') return matchOwner(method, parts);
  if (parts[1] === 'v1' && parts[2] === 'webhooks') return matchWebhooks(method, parts);
  if (path === '/v1/audit') {
    const route = ROUTES.find((r) => r.pattern === path && r.method === method);
    return route ? { route, apiKey: undefined } : 'method_not_allowed';
  }
  if (parts[1] !== 'v1' || parts[2] !== 'keys' || parts.length > 5) return 'no_route';
  let apiKey: string | undefined;
  let pattern = '/v1/keys';
  if (parts.length >= 4) {
    try {
      apiKey = decodeURIComponent(parts[3] as string);
    } catch {
      return 'no_route';
    }
    if (!API_KEY.test(apiKey)) return 'no_route';
    pattern = parts.length === 5 ? `/v1/keys/{apiKey}/${parts[4]}` : '/v1/keys/{apiKey}';
  }
  const candidates = ROUTES.filter((r) => r.pattern === pattern);
  if (candidates.length === 0) return 'no_route';
  const route = candidates.find((r) => r.method === method);
  return route ? { route, apiKey } : 'method_not_allowed';
}

/**
 * With the embedded store, the problem naming the credits a write carries (a top-up, or `credits` in a
 * create, PATCH or owner PUT), answered 501 credits_need_redis; undefined when it carries none.
 */
function embeddedCreditsProblem(pattern: string, body: unknown): string | undefined {
  if (pattern.endsWith('/credits'))
    return 'body.add: credits are topped up in Redis only; with the embedded store set credits.remaining in the keys file (KEYGATE_KEYS_FILE)';
  if (typeof body === 'object' && body !== null && !Array.isArray(body) && Object.hasOwn(body, 'credits'))
    return 'body.credits: credits are set over the API in Redis only; with the embedded store set them in the keys file (KEYGATE_KEYS_FILE)';
  return undefined;
}

/** The console's files, read once at start: a handful of small files, served from memory. */
function loadConsole(dir: string): Map<string, { type: string; body: Buffer }> {
  const files = new Map<string, { type: string; body: Buffer }>();
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return files;
  }
  for (const name of names) {
    const type = TYPES[extname(name)];
    if (type) files.set(name === 'index.html' ? '' : name, { type, body: readFileSync(join(dir, name)) });
  }
  return files;
}

/**
 * The management API (KEYGATE_MANAGEMENT_PORT): keys over HTTP for a service's
 * settings backend, and the operator console at /console/. Its own listener,
 * so a NetworkPolicy admits the settings backend here without admitting it to
 * the proxy or the monitoring namespace to keys. Nothing here runs on the
 * proxy's request path. Every /v1/ call needs a token from the tokens file;
 * every change goes through the same key operations as `keygate keys`.
 */
export function createManagementServer(
  options: {
    limits: Pick<Limits, 'headersTimeoutMs' | 'requestTimeoutMs' | 'keepAliveTimeoutMs' | 'maxHeaderBytes'>;
    consoleDir?: string;
    openapiFile?: string;
    /**
     * The secret scanning listener (KEYGATE_SCANNING_PORT): POST /v1/secret-scanning/github and nothing
     * else, so publishing its port publishes that one path (no console, no /v1/ route, no token accepted).
     */
    scanningOnly?: boolean;
  },
  deps: ManagementServerDeps,
): Server {
  const openapi = readFileSync(options.openapiFile ?? OPENAPI_FILE);
  const consoleFiles = loadConsole(options.consoleDir ?? CONSOLE_DIR);
  const routeDeps = {
    ops: deps.ops,
    store: deps.store,
    now: deps.now,
    ...(deps.owners && { owners: deps.owners }),
    ...(deps.audit && { audit: deps.audit }),
    ...(deps.webhooks && { webhooks: deps.webhooks }),
  };

  const send = (res: ServerResponse, status: number, body?: unknown, headers?: Readonly<Record<string, string>>) => {
    if (res.headersSent) return void res.destroy();
    res.statusCode = status;
    for (const [k, v] of Object.entries(headers ?? {})) res.setHeader(k, v);
    if (body === undefined) return void res.end();
    const text = Buffer.from(JSON.stringify(body));
    res.setHeader('content-type', 'application/json');
    res.setHeader('content-length', text.length);
    res.end(text);
  };
  /** The one place a management error becomes a response. */
  const fail = (
    res: ServerResponse,
    error: ManagementError,
    message?: string,
    problems?: readonly string[],
    version?: number,
  ) => {
    const { status } = MANAGEMENT_ERRORS[error];
    const headers: Record<string, string> =
      status === 401 ? { 'www-authenticate': 'Bearer realm="keygate-management"' } : {};
    if (status === 413) headers.connection = 'close';
    send(
      res,
      status,
      {
        error,
        message: message ?? MANAGEMENT_ERRORS[error].message,
        ...(problems && { problems }),
        ...(version !== undefined && { version }),
      },
      headers,
    );
  };
  const answer = (res: ServerResponse, a: Answer) =>
    'error' in a ? fail(res, a.error, a.message, a.problems, a.version) : send(res, a.status, a.body, a.headers);

  const serveConsole = (req: IncomingMessage, res: ServerResponse, path: string) => {
    if (req.method !== 'GET' && req.method !== 'HEAD') return fail(res, 'method_not_allowed');
    const file = consoleFiles.get(path.slice('/console/'.length));
    if (!file) return fail(res, 'no_route');
    res.setHeader('content-type', file.type);
    res.setHeader('content-length', file.body.length);
    res.end(req.method === 'HEAD' ? undefined : file.body);
  };

  /** The token this request presents, or undefined. Exactly one Authorization header, exactly "Bearer <token>". */
  const authenticate = (req: IncomingMessage): ManagementToken | undefined => {
    let value: string | undefined;
    const raw = req.rawHeaders;
    for (let i = 0; i < raw.length; i += 2) {
      if ((raw[i] as string).toLowerCase() !== 'authorization') continue;
      if (value !== undefined) return undefined;
      value = raw[i + 1];
    }
    const m = value === undefined ? null : /^Bearer ([\x21-\x7e]{1,512})$/.exec(value);
    return m ? matchToken(deps.tokens(), m[1] as string) : undefined;
  };

  const readBody = (req: IncomingMessage, max = MAX_BODY_BYTES): Promise<Buffer | 'too_large'> =>
    new Promise((resolve, reject) => {
      const declared = Number(req.headers['content-length'] ?? 0);
      if (declared > max) return resolve('too_large');
      const chunks: Buffer[] = [];
      let size = 0;
      req.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > max) {
          req.removeAllListeners('data');
          req.pause();
          resolve('too_large');
        } else chunks.push(chunk);
      });
      req.on('end', () => resolve(Buffer.concat(chunks)));
      req.on('error', reject);
    });

  async function handle(req: IncomingMessage, res: ServerResponse, line: Record<string, unknown>): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://management.invalid');
    const path = url.pathname;
    if (options.scanningOnly && path !== GITHUB_SCANNING_PATH) return fail(res, 'no_route');
    if (path === '/' || path === '/console' || path === '/favicon.ico') {
      // A browser asks for /favicon.ico on its own: send it to the console's icon rather than a 404.
      res.setHeader('location', path === '/favicon.ico' ? '/console/favicon.svg' : '/console/');
      return send(res, 308);
    }
    if (path.startsWith('/console/')) return serveConsole(req, res, path);
    const method = req.method ?? '';
    if (path === GITHUB_SCANNING_PATH && deps.scanning) {
      // Authenticated by GitHub's signature over the raw body, not by a management token.
      line.route = path;
      if (method !== 'POST') return fail(res, 'method_not_allowed');
      const raw = await readBody(req, MAX_REPORT_BYTES);
      if (raw === 'too_large') return fail(res, 'report_too_large');
      line.actor = GITHUB_SCANNING_ACTOR;
      return answer(res, await handleScanningReport(req, raw, { ...deps.scanning, ops: deps.ops }));
    }
    const openapiRoute = path === '/v1/openapi.json';
    const whoamiRoute = path === '/v1/whoami';
    const fixedRoute = openapiRoute || whoamiRoute;
    const found = fixedRoute ? undefined : match(method === 'HEAD' ? 'GET' : method, path);
    if (found === 'no_route') return fail(res, 'no_route');
    if (found === 'method_not_allowed' || (fixedRoute && method !== 'GET' && method !== 'HEAD'))
      return fail(res, 'method_not_allowed');
    line.route = fixedRoute ? path : found?.route.pattern;
    // Every /v1/ call, the description included, needs a token: the console signs in with one first.
    const token = authenticate(req);
    if (!token) return fail(res, 'unauthorized');
    line.actor = token.name;
    // Who the token is and whether a write would be accepted: the console shows only what the token may do.
    if (whoamiRoute)
      return send(res, 200, {
        name: token.name,
        access: token.access,
        writes: token.access === 'write' && deps.store.kind === 'redis',
      });
    if (openapiRoute) {
      res.setHeader('content-type', 'application/json');
      res.setHeader('content-length', openapi.length);
      return void res.end(method === 'HEAD' ? undefined : openapi);
    }
    const { route, apiKey, owner, event } = found as Matched;
    if (route.write && token.access !== 'write') return fail(res, 'read_only_token');
    let body: unknown;
    if (route.body) {
      const raw = await readBody(req);
      if (raw === 'too_large') return fail(res, 'body_too_large');
      if (raw.length > 0) {
        if (!JSON_TYPE.test(req.headers['content-type'] ?? '')) return fail(res, 'not_json');
        try {
          body = JSON.parse(raw.toString('utf8'));
        } catch {
          return fail(res, 'invalid_request', undefined, ['body: not valid JSON']);
        }
      }
    }
    if (route.write && deps.store.kind !== 'redis') {
      // The body is read first so that credits, which the embedded store cannot take over the API, are
      // named: 501 with the field, rather than the 409 every other write gets there.
      if (route.pattern.startsWith('/v1/webhooks/')) return fail(res, 'webhooks_need_redis');
      const credits = embeddedCreditsProblem(route.pattern, body);
      return credits ? fail(res, 'credits_need_redis', undefined, [credits]) : fail(res, 'writes_need_redis');
    }
    const idem = req.headers['idempotency-key'];
    const call = {
      apiKey,
      ...(owner !== undefined && { owner }),
      ...(event !== undefined && { event }),
      query: url.searchParams,
      body,
      actor: token.name,
      idempotencyKey: Array.isArray(idem) ? idem.join(',') : idem,
    };
    answer(res, await route.handle(call, routeDeps));
  }

  return createServer(serverTimeouts(options.limits), (req, res) => {
    const started = performance.now();
    // Logged once per call: the route pattern and the token's name, never the token, a key or a secret.
    const line: Record<string, unknown> = { method: req.method };
    for (const [k, v] of SECURITY_HEADERS) res.setHeader(k, v);
    res.once('close', () => {
      line.status = res.statusCode;
      line.durationMs = Math.round((performance.now() - started) * 10) / 10;
      deps.logger.info({ management: line }, 'management request');
    });
    handle(req, res, line).catch((err: unknown) => {
      if (err instanceof DurabilityError) {
        deps.logger.warn({ err: err.message }, 'management request: change not acknowledged by enough replicas');
        return fail(res, 'not_durable');
      }
      if (err instanceof StoreUnavailableError) {
        deps.logger.warn({ err: err.message }, 'management request: key store unavailable');
        return fail(res, 'store_unavailable');
      }
      deps.logger.error({ err }, 'management request: internal error');
      fail(res, 'internal_error');
    });
  });
}
