import { createHmac } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createToken } from '../../src/client/create-token.js';
import { loadConfig } from '../../src/config/load-config.js';
import { loadPolicy } from '../../src/policy/load-policy.js';
import { ERRORS, REASONS, type ErrorCode, type Reason } from '../../src/errors.js';
import { checkTime } from '../../src/pipeline/check-time.js';
import { decodeToken, type Claims } from '../../src/pipeline/decode-token.js';
import { verifySignature } from '../../src/pipeline/verify-signature.js';
import { prepareKey } from '../../src/keys/prepared-key.js';
import { repoRoot } from '../helpers/deploy.js';
import { makeKey } from '../helpers/make-key.js';
import { codeSpans, readDoc, section, tableRows } from '../helpers/markdown.js';
import { sign } from '../helpers/tokens.js';

/**
 * docs/contract.md is what client authors write against; these checks keep it and the code saying the same thing,
 * in both directions: the error table against the catalogue, the header and claim tables against the decoder, and
 * the worked example against the client and the verifier.
 */
const doc = readDoc('docs/contract.md');
const OPTS = { maxTokenBytes: 4096, defaultRecvWindowSeconds: 30, maxRecvWindowSeconds: 60 };

/**
 * The codes that belong in the contract's table: those a client can get from authentication and authorization,
 * and no others (40000, 40400, 50200... are about the request or the upstream, not the token; they are in
 * docs/reference/errors.md). The authentication path is the steps createAuthenticator runs, then authorize; each
 * refuses only through deny('<reason>'), so the reasons are read from those files, and a new refusal there
 * needs a row here. The one refusal of that path made elsewhere: a store that does not answer during the key
 * lookup or the admit call throws StoreUnavailableError, which the gateway turns into deny('store_unavailable').
 */
const AUTH_PATH_STEPS = [
  'ip-budget',
  'read-credentials',
  'decode-token',
  'check-time',
  'verify-signature',
  'check-binding',
  'authenticate',
  'authorize',
];
const AUTH_PATH_THROWN: Reason[] = ['store_unavailable'];

const authPathReasons = [
  ...new Set([
    ...AUTH_PATH_STEPS.flatMap((step) =>
      [...readFileSync(join(repoRoot, 'src/pipeline', `${step}.ts`), 'utf8').matchAll(/\bdeny\('(\w+)'\)/g)].map(
        (m) => m[1] as Reason,
      ),
    ),
    ...AUTH_PATH_THROWN,
  ]),
];
const authPathCodes = [...new Set(authPathReasons.map((r) => REASONS[r].code))].sort();

/** The rows of the "Errors" section's table: HTTP | Code | Message | Meaning | Origin. */
const errorRows = tableRows(section(doc, 'Errors'))
  .filter((cells) => /^\d{3}$/.test(cells[0]!))
  .map(([status, code, message, , origin]) => ({
    status: Number(status),
    code: code!,
    message: message!,
    origin: origin!,
  }));

describe('docs/contract.md: the error table and the catalogue (src/errors.ts)', () => {
  it('reads the authentication path (the scan finds its refusals)', () => {
    expect(authPathReasons).toEqual(
      expect.arrayContaining([
        'missing_header',
        'bad_signature',
        'replay',
        'unknown_key',
        'scope_denied',
        'rate_limited',
      ]),
    );
    for (const r of authPathReasons) expect(Object.keys(REASONS), r).toContain(r);
  });

  it.each(authPathCodes)('code %s of the authentication path has a row with its status and message', (code) => {
    const { status, message } = ERRORS[code];
    expect(errorRows.filter((row) => row.code === String(code))).toEqual([
      { status, code: String(code), message, origin: expect.any(String) },
    ]);
  });

  it('has a row only for codes the catalogue has, each with its status and message, and no code twice', () => {
    expect(errorRows.length).toBeGreaterThan(0);
    for (const row of errorRows) {
      const entry = ERRORS[Number(row.code) as ErrorCode];
      expect(entry, `code ${row.code} is in ERRORS`).toBeDefined();
      expect({ code: row.code, status: row.status, message: row.message }).toEqual({
        code: row.code,
        status: entry.status,
        message: entry.message,
      });
    }
    expect(new Set(errorRows.map((r) => r.code)).size).toBe(errorRows.length);
  });

  it("marks each row as the contract's or Keygate's", () => {
    for (const row of errorRows) expect(['contract', 'Keygate'], row.code).toContain(row.origin);
  });
});

/** A documented table as { name → cells after the name }, for the rows whose first cell is one `name`. */
function namedRows(title: string): Map<string, string[]> {
  return new Map(
    tableRows(section(doc, title))
      .filter((cells) => /^`[^`]+`$/.test(cells[0]!))
      .map((cells) => [codeSpans(cells[0]!)[0]!, cells.slice(1)]),
  );
}

const headerFields = namedRows('Header'); // type | value
const claimRows = namedRows('Payload claims'); // type | required | rule
const requiredClaims = [...claimRows].filter(([, [, required]]) => required === 'yes').map(([name]) => name);
const optionalClaims = [...claimRows].filter(([, [, required]]) => required === 'no').map(([name]) => name);
const documentedType = codeSpans(claimRows.get('type')?.[2] ?? '')[0];

/** The worked example's inputs and its JSON and text blocks, in order. */
const example = section(doc, 'Worked example');
const blocks = [...example.matchAll(/```(\w+)\n([\s\S]*?)\n```/g)].map((m) => ({ lang: m[1]!, body: m[2]! }));
const inputs = new Map(
  blocks[0]!.body.split('\n').map((line) => {
    const m = /^(.+?)\s{2,}(\S+)$/.exec(line);
    return [m?.[1] ?? line, m?.[2] ?? ''];
  }),
);
const input = (name: string): string => {
  const v = inputs.get(name);
  if (v === undefined) throw new Error(`worked example: no input "${name}"`);
  return v;
};
const exampleHeader = JSON.parse(blocks.find((b) => b.lang === 'json' && b.body.includes('"alg"'))!.body) as Record<
  string,
  unknown
>;
const examplePayload = JSON.parse(blocks.find((b) => b.lang === 'json' && b.body.includes('"sub"'))!.body) as Record<
  string,
  unknown
>;

const SECRET = 'contract-doc-secret-0123456789';
const decode = (payload: unknown, header: unknown = exampleHeader) => decodeToken(sign(header, payload, SECRET), OPTS);
const without = (o: Record<string, unknown>, name: string) =>
  Object.fromEntries(Object.entries(o).filter(([k]) => k !== name));
/** A value of another JSON type than the documented one. */
const wrongType = (type: string | undefined) => (type === 'string' ? 1 : 'x');

describe('docs/contract.md: the header and claims against the decoder (src/pipeline/decode-token.ts)', () => {
  it('documents alg, typ and the four contract claims', () => {
    expect([...headerFields.keys()].sort()).toEqual(['alg', 'typ']);
    expect(requiredClaims.sort()).toEqual(['nonce', 'sub', 'type']);
    expect(optionalClaims).toContain('recv_window');
    expect(documentedType).toBeDefined();
  });

  it('the documented header values are the ones the decoder accepts, and no other', () => {
    const documented = Object.fromEntries([...headerFields].map(([name, [, value]]) => [name, codeSpans(value!)[0]]));
    expect(exampleHeader).toEqual(documented);
    expect(decode(examplePayload, documented)).toMatchObject({ ok: true });
    for (const name of headerFields.keys()) {
      expect(decode(examplePayload, { ...documented, [name]: `${documented[name]}x` }), name).toMatchObject({
        ok: false,
        reason: 'bad_header',
      });
    }
  });

  it('the documented type value is the one the decoder accepts, and no variant of it', () => {
    expect(examplePayload.type).toBe(documentedType);
    expect(decode({ ...examplePayload, type: documentedType })).toMatchObject({ ok: true });
    for (const variant of [
      documentedType!.toLowerCase(),
      `${documentedType} `,
      documentedType!.replace(/2$/, '3'),
      '',
    ]) {
      expect(decode({ ...examplePayload, type: variant }), variant).toMatchObject({ ok: false, reason: 'bad_claims' });
    }
  });

  it('a payload of the required claims alone is accepted (the decoder requires nothing the doc leaves out)', () => {
    const minimal = Object.fromEntries(requiredClaims.map((name) => [name, examplePayload[name]]));
    expect(Object.keys(minimal)).toHaveLength(requiredClaims.length);
    expect(decode(minimal)).toMatchObject({
      ok: true,
      sub: minimal.sub,
      recvWindowSeconds: OPTS.defaultRecvWindowSeconds,
    });
  });

  it.each(requiredClaims)('required claim %s: without it the token is refused', (name) => {
    expect(decode(without(examplePayload, name))).toMatchObject({ ok: false, code: 40106, reason: 'bad_claims' });
  });

  it.each(optionalClaims)('optional claim %s: accepted with a value of its documented type, and without it', (name) => {
    const value = examplePayload[name] ?? (claimRows.get(name)![0] === 'number' ? 0 : '1');
    expect(decode({ ...examplePayload, [name]: value })).toMatchObject({ ok: true });
    expect(decode(without(examplePayload, name))).toMatchObject({ ok: true });
  });

  it.each([...claimRows.keys()])(
    'claim %s: the decoder reads it, with the documented JSON type and no other',
    (name) => {
      const type = claimRows.get(name)![0];
      expect(['string', 'number'], `${name}: documented type`).toContain(type);
      // Accepted with the documented type: the worked example (which the client makes) carries it in that type.
      if (name in examplePayload) expect(typeof examplePayload[name], `${name} in the worked example`).toBe(type);
      expect(decode({ ...examplePayload, [name]: wrongType(type) })).toMatchObject({
        ok: false,
        code: 40106,
        reason: 'bad_claims',
      });
    },
  );
});

describe("docs/contract.md: the defaults it states are the code's (src/config/load-config.ts)", () => {
  const stated = (pattern: RegExp): number => {
    const m = pattern.exec(doc);
    if (!m) throw new Error(`docs/contract.md does not state ${pattern}`);
    return Number(m[1]);
  };

  it('recv_window: the default and the cap of a policy that sets neither', () => {
    const dir = mkdtempSync(join(tmpdir(), 'keygate-contract-'));
    writeFileSync(join(dir, 'policy.yaml'), 'routes: []\n');
    const problems: string[] = [];
    const policy = loadPolicy(join(dir, 'policy.yaml'), problems);
    rmSync(dir, { recursive: true });
    expect(problems).toEqual([]);
    expect(stated(/when absent the server uses (\d+)/)).toBe(policy.defaultRecvWindowSeconds);
    expect(stated(/`maxRecvWindowSeconds` \((\d+) by default/)).toBe(policy.maxRecvWindowSeconds);
  });

  it('the largest token', () => {
    expect(stated(/`KEYGATE_MAX_TOKEN_BYTES` long \((\d+) by default\)/)).toBe(
      loadConfig({ KEYGATE_UPSTREAM: 'http://127.0.0.1:3000' }).limits.maxTokenBytes,
    );
  });
});

describe('docs/contract.md: the worked example is what the client makes and the verifier accepts', () => {
  const apiKey = input('API key');
  const apiSecret = input('API secret');
  const nonce = BigInt(input('nonce'));
  const recvWindow = Number(input('recv_window'));
  const token = /^Authorization: Bearer (\S+)$/m.exec(
    blocks.find((b) => b.lang === 'http' && b.body.includes('Bearer ey'))!.body,
  )![1]!;
  const [h, p, s] = token.split('.') as [string, string, string];
  // The key as Keygate imports it from a record (prepared-key.ts): the secret's UTF-8 bytes.
  const verifyKeys = prepareKey(makeKey({ apiKey, secret: apiSecret })).verifyKeys;

  it('the token is the one keygate/client makes from the inputs', async () => {
    expect(await createToken({ apiKey, apiSecret, recvWindow, now: nonce })).toBe(token);
  });

  it('the header and payload blocks are the decoded token parts, and the payload carries the inputs', () => {
    const jsonBlocks = blocks.filter((b) => b.lang === 'json').map((b) => b.body);
    expect(jsonBlocks).toEqual([Buffer.from(h, 'base64url').toString(), Buffer.from(p, 'base64url').toString()]);
    expect(examplePayload).toEqual({
      type: documentedType,
      sub: apiKey,
      nonce: String(nonce),
      recv_window: String(recvWindow),
    });
  });

  it('the signing input and the signature (hex and base64url) are HMAC-SHA256 with the plain secret', () => {
    const text = blocks.filter((b) => b.lang === 'text').map((b) => b.body);
    expect(text).toContain(`${h}.${p}`);
    const mac = createHmac('sha256', apiSecret).update(`${h}.${p}`).digest();
    expect(text).toContain(`${mac.toString('hex')}\n${mac.toString('base64url')}`);
    expect(s).toBe(mac.toString('base64url'));
  });

  it('the time the text gives is the nonce', () => {
    const iso = new Date(Number(nonce / 1_000_000n))
      .toISOString()
      .replace('Z', `${String(nonce % 1_000_000n).padStart(6, '0')}Z`);
    expect(example).toContain(iso);
  });

  it('Keygate accepts the token at its nonce and inside the window, refuses it at the window edge', () => {
    const claims = decodeToken(token, OPTS);
    expect(claims).toMatchObject({ ok: true, sub: apiKey, nonceNs: nonce, recvWindowSeconds: recvWindow });
    const window = BigInt(recvWindow) * 1_000_000_000n;
    for (const [now, ok] of [
      [nonce, true],
      [nonce + window - 1n, true],
      [nonce - window + 1n, true],
      [nonce + window, false],
      [nonce - window, false],
    ] as const) {
      expect(
        checkTime(claims as Claims, now).ok,
        `now = nonce ${now - nonce >= 0n ? '+' : '−'} ${now - nonce < 0n ? nonce - now : now - nonce} ns`,
      ).toBe(ok);
    }
    const nowMs = Number(nonce / 1_000_000n);
    expect(verifySignature(token, 'HS256', verifyKeys, nowMs)).toMatchObject({ ok: true });
  });

  it('the Base64-secret signature it shows is what a Base64-encoded secret gives, and Keygate refuses it', () => {
    const b64Secret = Buffer.from(apiSecret).toString('base64');
    const b64Signature = createHmac('sha256', b64Secret).update(`${h}.${p}`).digest('base64url');
    expect(example).toContain(`(\`${b64Secret}\`), the signature would be \`${b64Signature}\``);
    expect(verifySignature(`${h}.${p}.${b64Signature}`, 'HS256', verifyKeys, Number(nonce / 1_000_000n))).toMatchObject(
      {
        ok: false,
        code: 40106,
        reason: 'bad_signature',
      },
    );
  });
});
