import { request, Agent } from 'node:http';
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OTHER_SECRET, SECRET, startFixture, type Fixture } from '../helpers/adversarial.js';
import { token } from '../helpers/tokens.js';

/**
 * Nothing of one request reaches another (issue 39, "reuse never leaks"): aborted, slow, refused and
 * passed requests of different keys and routes, interleaved on many keep-alive connections at once.
 * Every request carries its own X-Request-Id; the upstream answers with what it received. Whatever
 * the request path keeps per request (its walk, its log record, its upstream exchange, the shared
 * 'close' listeners that find them on the response, a key's prepared Charge), each upstream request
 * must carry its own key's X-Api-Key-Id, each client get its own answer, and each log line name its
 * own key and reason, exactly once.
 */

type Kind = 'pass-good' | 'pass-other-post' | 'slow-good' | 'public' | 'scope' | 'forged' | 'no-token' | 'aborted';
const KINDS: readonly Kind[] = [
  'pass-good',
  'pass-other-post',
  'slow-good',
  'public',
  'scope',
  'forged',
  'no-token',
  'aborted',
];
const TOTAL = 640;
const CONCURRENCY = 48;

interface Expected {
  readonly kind: Kind;
  readonly method: string;
  readonly path: string;
  readonly authorization: string | undefined;
  /** The key the upstream must be told of (undefined: nothing reaches it, or a public route: no identity). */
  readonly upstreamKey: string | undefined;
  readonly forwarded: boolean;
  readonly status: number | undefined;
  /** The log line's keyId and reason. */
  readonly keyId: string | undefined;
  readonly reason: string | undefined;
}

function plan(i: number): Expected {
  const kind = KINDS[(i * 7 + (i >> 3)) % KINDS.length] as Kind;
  const good = `Bearer ${token('good', SECRET)}`;
  const other = `Bearer ${token('other', OTHER_SECRET)}`;
  switch (kind) {
    case 'pass-good':
      return {
        kind,
        method: 'GET',
        path: '/api/v3/viewer/accounts',
        authorization: good,
        upstreamKey: 'key-good',
        forwarded: true,
        status: 200,
        keyId: 'key-good',
        reason: undefined,
      };
    case 'pass-other-post':
      return {
        kind,
        method: 'POST',
        path: `/api/v3/items/${i}`,
        authorization: other,
        upstreamKey: 'key-other',
        forwarded: true,
        status: 200,
        keyId: 'key-other',
        reason: undefined,
      };
    case 'slow-good':
      return {
        kind,
        method: 'GET',
        path: `/api/v3/files/slow-${i}`,
        authorization: good,
        upstreamKey: 'key-good',
        forwarded: true,
        status: 200,
        keyId: 'key-good',
        reason: undefined,
      };
    case 'public':
      return {
        kind,
        method: 'GET',
        path: '/status',
        authorization: other,
        upstreamKey: undefined,
        forwarded: true,
        status: 200,
        keyId: undefined,
        reason: undefined,
      };
    case 'scope':
      return {
        kind,
        method: 'GET',
        path: '/api/v3/viewer/accounts',
        authorization: `Bearer ${token('narrow', OTHER_SECRET)}`,
        upstreamKey: undefined,
        forwarded: false,
        status: 403,
        keyId: 'key-narrow',
        reason: 'scope_denied',
      };
    case 'forged':
      return {
        kind,
        method: 'GET',
        path: '/api/v3/viewer/accounts',
        authorization: `Bearer ${token('good', OTHER_SECRET)}`,
        upstreamKey: undefined,
        forwarded: false,
        status: 401,
        keyId: undefined,
        reason: 'bad_signature',
      };
    case 'no-token':
      return {
        kind,
        method: 'POST',
        path: `/api/v3/items/${i}`,
        authorization: undefined,
        upstreamKey: undefined,
        forwarded: false,
        status: 401,
        keyId: undefined,
        reason: 'missing_header',
      };
    case 'aborted':
      // Forwarded, then the client goes away while the upstream holds its answer.
      return {
        kind,
        method: 'GET',
        path: `/api/v3/files/hold-${i}`,
        authorization: other,
        upstreamKey: 'key-other',
        forwarded: true,
        status: undefined,
        keyId: 'key-other',
        reason: undefined,
      };
  }
}

describe('adversarial: interleaved requests never see each other', () => {
  let f: Fixture;
  /** Upstream arrivals waited for by the aborting clients, by request id. */
  const arrivals = new Map<string, () => void>();
  beforeAll(async () => {
    f = await startFixture();
    f.upstream.handler = (req, res) => {
      req.on('error', () => {});
      const id = String(req.headers['x-request-id']);
      arrivals.get(id)?.();
      const answer = () => {
        if (res.destroyed) return;
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify({ id, keyId: req.headers['x-api-key-id'] ?? null, url: req.url }));
      };
      req.resume();
      req.on('end', () => {
        if (req.url?.includes('/hold-')) setTimeout(answer, 150);
        else if (req.url?.includes('/slow-')) setTimeout(answer, 5 + (Number(req.url.split('-').pop()) % 40));
        else answer();
      });
    };
  });
  afterAll(async () => {
    await f?.close();
  });

  it(`${TOTAL} requests of 8 kinds on ${CONCURRENCY} connections: every answer, upstream request and log line is its own`, async () => {
    const agent = new Agent({ keepAlive: true, maxSockets: CONCURRENCY });
    const expected = new Map<string, Expected>();
    const answers = new Map<string, { status: number; echoedId: string | undefined; body: string }>();

    const viaAgent = (id: string, e: Expected) =>
      new Promise<void>((resolve, reject) => {
        const headers: Record<string, string> = { 'x-request-id': id };
        if (e.authorization) headers.authorization = e.authorization;
        const body = e.method === 'POST' ? `{"n":"${id}"}` : undefined;
        if (body) headers['content-type'] = 'application/json';
        const req = request(`${f.gate.url}${e.path}`, { method: e.method, headers, agent }, (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (c: string) => (text += c));
          res.on('end', () => {
            answers.set(id, {
              status: res.statusCode ?? 0,
              echoedId: res.headers['x-request-id'] as string,
              body: text,
            });
            resolve();
          });
        });
        req.on('error', reject);
        req.end(body);
      });

    const aborting = (id: string, e: Expected) =>
      new Promise<void>((resolve) => {
        const s = connect(f.gate.port, '127.0.0.1');
        s.on('error', () => {});
        s.on('close', () => resolve());
        const give = setTimeout(() => s.destroy(), 3_000);
        arrivals.set(id, () => {
          arrivals.delete(id);
          clearTimeout(give);
          s.destroy();
        });
        s.write(
          `${e.method} ${e.path} HTTP/1.1\r\nHost: x\r\nX-Request-Id: ${id}\r\nAuthorization: ${e.authorization}\r\n\r\n`,
        );
      });

    let next = 0;
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (next < TOTAL) {
          const i = next++;
          const id = `leak-${i}`;
          const e = plan(i);
          expected.set(id, e);
          await (e.kind === 'aborted' ? aborting(id, e) : viaAgent(id, e));
        }
      }),
    );
    agent.destroy();
    // Every line is written when its response closes; an aborted one's after the abort reaches Keygate.
    const lines = async () =>
      f.gate.logs
        .flatMap((chunk) => chunk.split('\n'))
        .filter((l) => l.includes('"msg":"request"'))
        .map((l) => JSON.parse(l) as Record<string, unknown>);
    const deadline = Date.now() + 5_000;
    while (
      (await lines()).filter((l) => String(l.requestId).startsWith('leak-')).length < TOTAL &&
      Date.now() < deadline
    )
      await new Promise((r) => setTimeout(r, 50));

    // Each client its own answer.
    for (const [id, e] of expected) {
      if (e.kind === 'aborted') continue;
      const a = answers.get(id);
      expect(a, id).toBeDefined();
      expect({ id, status: a?.status, echoed: a?.echoedId }).toEqual({ id, status: e.status, echoed: id });
      if (e.status === 200) {
        const body = JSON.parse(a?.body ?? '{}') as { id: string; keyId: string | null; url: string };
        expect({ id: body.id, keyId: body.keyId, url: body.url }).toEqual({
          id,
          keyId: e.upstreamKey ?? null,
          url: e.path,
        });
      } else expect(JSON.parse(a?.body ?? '{}')).toHaveProperty('code');
    }

    // Each upstream request its own identity; nothing refused reaches it.
    const upstreamSeen = new Map<string, number>();
    for (const r of f.upstream.received) {
      const id = String(r.headers['x-request-id']);
      const e = expected.get(id);
      expect(e, `the upstream got a request no client sent: ${id}`).toBeDefined();
      upstreamSeen.set(id, (upstreamSeen.get(id) ?? 0) + 1);
      expect({ id, forwarded: e?.forwarded, key: r.headers['x-api-key-id'], url: r.url }).toEqual({
        id,
        forwarded: true,
        key: e?.upstreamKey,
        url: e?.path,
      });
      // Only Keygate's own identity header, once.
      expect(r.rawHeaders.filter((h, i) => i % 2 === 0 && h.toLowerCase() === 'x-api-key-id').length).toBe(
        e?.upstreamKey === undefined ? 0 : 1,
      );
    }
    for (const [id, e] of expected) if (e.forwarded) expect(upstreamSeen.get(id), id).toBe(1);

    // Each log line its own key and reason, one line per request.
    const byId = new Map<string, Array<Record<string, unknown>>>();
    for (const l of await lines()) {
      const id = String(l.requestId);
      if (!id.startsWith('leak-')) continue;
      byId.set(id, [...(byId.get(id) ?? []), l]);
    }
    for (const [id, e] of expected) {
      const got = byId.get(id) ?? [];
      expect(got.length, `${id} (${e.kind}): log lines`).toBe(1);
      const l = got[0] as Record<string, unknown>;
      expect({
        id,
        kind: e.kind,
        keyId: l.keyId,
        reason: l.reason,
        path: l.route === undefined ? undefined : 'set',
      }).toEqual({
        id,
        kind: e.kind,
        keyId: e.keyId,
        reason: e.reason,
        path: 'set',
      });
      if (e.kind === 'aborted') expect(l.aborted, id).toBe(true);
      else expect(l.status, id).toBe(e.status);
    }
  });
});
