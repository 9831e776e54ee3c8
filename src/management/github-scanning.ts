// Tested in test/e2e/secret-scanning.test.ts, test/unit/github-scanning.test.ts.
import { verify } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { GithubScanningKey } from '../files/github-scanning-keys.js';
import type { KeyOperations } from '../operations/key-operations.js';
import type { Answer } from './management-answer.js';
import type { ScanningLabel } from '../observe/scanning-metrics.js';

export type { ScanningLabel } from '../observe/scanning-metrics.js';

/** The one path it is served on (management port, only with KEYGATE_GITHUB_SCANNING_KEYS_FILE). */
export const GITHUB_SCANNING_PATH = '/v1/secret-scanning/github';
/** A report larger than this is refused 413 unread (GitHub batches matches; 1 MiB is far above a batch). */
export const MAX_REPORT_BYTES = 1024 * 1024;
/** The audit actor of a revoke or ended grace that a GitHub report caused. */
export const GITHUB_SCANNING_ACTOR = 'github-secret-scanning';

/** The one header of that name, or undefined when absent or repeated. */
function header(req: IncomingMessage, name: string): string | undefined {
  let value: string | undefined;
  for (let i = 0; i < req.rawHeaders.length; i += 2) {
    if ((req.rawHeaders[i] as string).toLowerCase() !== name) continue;
    if (value !== undefined) return undefined;
    value = req.rawHeaders[i + 1];
  }
  return value;
}

/**
 * Whether `body` is signed by the key GitHub names: ECDSA P-256 SHA-256, the signature base64 DER, over
 * the raw bytes as received. The identifier picks one key; it never falls back to another, so a body
 * signed for one identifier does not pass under another's header.
 */
export function verifyReport(
  keys: readonly GithubScanningKey[],
  id: string | undefined,
  signature: string | undefined,
  body: Buffer,
): boolean {
  if (id === undefined || signature === undefined || !/^[A-Za-z0-9+/]{1,200}={0,2}$/.test(signature)) return false;
  const key = keys.find((k) => k.id === id);
  if (!key) return false;
  try {
    return verify('sha256', body, { key: key.pem, dsaEncoding: 'der' }, Buffer.from(signature, 'base64'));
  } catch {
    return false;
  }
}

interface ReportedToken {
  token: string;
  type: string;
  url?: string;
  source?: string;
}

/** The body: `[{token, type, url, source}]`; anything else is 400. */
function parseReport(body: Buffer): ReportedToken[] | string {
  let v: unknown;
  try {
    v = JSON.parse(body.toString('utf8'));
  } catch {
    return 'body: not valid JSON';
  }
  if (!Array.isArray(v) || v.length > 1000) return 'body: expected a list of at most 1000 {token, type, url, source}';
  const out: ReportedToken[] = [];
  for (const [i, e] of v.entries()) {
    const o = (typeof e === 'object' && e !== null ? e : {}) as Record<string, unknown>;
    if (typeof o.token !== 'string' || o.token.length === 0 || o.token.length > 1000)
      return `body[${i}].token: expected a string`;
    if (typeof o.type !== 'string' || o.type.length > 200) return `body[${i}].type: expected a string`;
    const text = (x: unknown) => (typeof x === 'string' ? x.slice(0, 2000) : undefined);
    const url = text(o.url);
    const source = text(o.source);
    out.push({
      token: o.token,
      type: o.type,
      ...(url !== undefined && { url }),
      ...(source !== undefined && { source }),
    });
  }
  return out;
}

/**
 * POST /v1/secret-scanning/github: GitHub's secret scanning partner report. No management token: the
 * signature is the authentication, checked before the body is parsed (a bad one changes nothing: 401).
 * Each token is looked up by its fingerprint and acted on through the key operations (reportLeak:
 * a current secret revokes its key, a previous one in its grace ends that grace), one at a time in the
 * order given; the answer labels every token.
 */
export async function handleScanningReport(
  req: IncomingMessage,
  body: Buffer,
  deps: {
    keys: () => readonly GithubScanningKey[];
    ops: Pick<KeyOperations, 'reportLeak'>;
    metrics: { count(label: ScanningLabel): void };
  },
): Promise<Answer> {
  const id = header(req, 'github-public-key-identifier');
  const signature = header(req, 'github-public-key-signature');
  if (!verifyReport(deps.keys(), id, signature, body)) return { error: 'signature_invalid' };
  const report = parseReport(body);
  if (typeof report === 'string') return { error: 'invalid_request', problems: [report] };
  const answers: { token_raw: string; token_type: string; label: ScanningLabel }[] = [];
  for (const t of report) {
    const where = { ...(t.url !== undefined && { url: t.url }), ...(t.source !== undefined && { source: t.source }) };
    const r = await deps.ops.reportLeak(t.token, where, GITHUB_SCANNING_ACTOR);
    deps.metrics.count(r.label);
    answers.push({ token_raw: t.token, token_type: t.type, label: r.label });
  }
  return { status: 200, body: answers };
}
