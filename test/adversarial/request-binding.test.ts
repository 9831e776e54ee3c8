import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startKeygate, type RunningKeygate } from '../helpers/keygate.js';
import { exchange, firstBody, statusOf } from '../helpers/raw-socket.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { KEYS, MAX, mint, ORDERS, POLICY, policyFile, raw } from '../helpers/binding.js';

/**
 * Issue 43, attacks on a bound token over raw sockets: target spellings a router would read as the bound
 * one, a chunked body, Expect: 100-continue. Each case checks the answer and what the upstream received.
 */
describe('binding: adversarial requests', () => {
  let upstream: RecordingUpstream;
  let gate: RunningKeygate;
  beforeAll(async () => {
    upstream = await startRecordingUpstream();
    gate = await startKeygate({
      upstream: upstream.url,
      keys: KEYS,
      env: { KEYGATE_CONFIG: policyFile(POLICY), KEYGATE_BOUND_BODY_MAX_BYTES: String(MAX) },
    });
  });
  afterAll(async () => {
    await gate.close();
    await upstream.close();
  });
  beforeEach(() => upstream.reset());

  it.each([
    // Spellings the router reads as the bound target (case folded, trailing slash, an escaped ":"), but not the same bytes.
    ['/API/V3/ORDERS', 401],
    [`${ORDERS}/`, 401],
    [`${ORDERS}?`, 401],
    // Spellings that hide structure: refused before authentication, whatever the token says.
    ['/api/v3%2Forders', 400],
    ['/api/v3//orders', 400],
    ['/api/v3/./orders', 400],
  ])('a token bound to the plain target, sent as %s, is refused (%i), nothing forwarded', async (spelling, status) => {
    const token = await mint('strict', { method: 'GET', path: ORDERS });
    const res = await exchange(gate.port, raw('GET', spelling, token, ['Connection: close']));
    expect(statusOf(res.text)).toBe(status);
    expect(firstBody(res.text)).toMatchObject({ code: status === 401 ? 40106 : 40000 });
    expect(upstream.received).toHaveLength(0);
  });

  it.each(['/api/v3%2Forders', '/api/v3//orders', '/api/v3/./orders'])(
    'a token bound to the spelling %s itself gets no further than the target check',
    async (spelling) => {
      const token = await mint('strict', { method: 'GET', path: spelling });
      const res = await exchange(gate.port, raw('GET', spelling, token, ['Connection: close']));
      expect(statusOf(res.text)).toBe(400);
      expect(upstream.received).toHaveLength(0);
    },
  );

  it('percent-encoding is never normalised: %3A and ":" are two targets', async () => {
    const token = await mint('strict', { method: 'GET', path: `${ORDERS}/a:b` });
    const res = await exchange(gate.port, raw('GET', `${ORDERS}/a%3Ab`, token, ['Connection: close']));
    expect(statusOf(res.text)).toBe(401);
    const own = await exchange(gate.port, raw('GET', `${ORDERS}/a:b`, token, ['Connection: close']));
    expect(statusOf(own.text)).toBe(200);
    expect(upstream.received.map((r) => r.url)).toEqual([`${ORDERS}/a:b`]);
  });

  it('a chunked body is hashed over its bytes (not its chunk framing) and forwarded with its length', async () => {
    const body = 'first part|second part';
    const token = await mint('strict', { method: 'POST', path: ORDERS, body });
    const framed = '0b\r\nfirst part|\r\n' + 'b\r\nsecond part\r\n' + '0\r\n\r\n';
    const res = await exchange(gate.port, [
      raw('POST', ORDERS, token, ['Transfer-Encoding: chunked']),
      framed.slice(0, 10),
      30,
      framed.slice(10),
    ]);
    expect(statusOf(res.text)).toBe(200);
    await expect.poll(() => upstream.received[0]?.complete).toBe(true);
    expect(upstream.received[0]!.body).toBe(body);
    expect(upstream.received[0]!.headers['content-length']).toBe(String(body.length));
    expect(upstream.received[0]!.headers['transfer-encoding']).toBeUndefined();
    // The same chunks under a token for another body: nothing forwarded.
    upstream.reset();
    const other = await mint('strict', { method: 'POST', path: ORDERS, body: 'first part|second parT' });
    const refused = await exchange(gate.port, raw('POST', ORDERS, other, ['Transfer-Encoding: chunked'], framed));
    expect(statusOf(refused.text)).toBe(401);
    expect(upstream.received).toHaveLength(0);
  });

  it('Expect: 100-continue: 100 only once the token passed, then the body is read, checked and forwarded', async () => {
    const body = '{"qty":3}';
    const token = await mint('strict', { method: 'POST', path: ORDERS, body });
    const res = await exchange(gate.port, [
      raw('POST', ORDERS, token, [`Content-Length: ${body.length}`, 'Expect: 100-continue']),
      150,
      body,
    ]);
    expect(res.statuses).toEqual([100, 200]);
    await expect.poll(() => upstream.received[0]?.complete).toBe(true);
    expect(upstream.received[0]!.body).toBe(body);
    expect(upstream.received[0]!.headers.expect).toBeUndefined();
  });

  it('Expect: 100-continue with a declared body over the bound: 413 and no 100', async () => {
    const token = await mint('strict', { method: 'POST', path: ORDERS, body: 'x' });
    const res = await exchange(
      gate.port,
      raw('POST', ORDERS, token, [`Content-Length: ${MAX + 1}`, 'Expect: 100-continue']),
      { quietMs: 300 },
    );
    expect(res.statuses).toEqual([413]);
    expect(upstream.received).toHaveLength(0);
  });

  it('Expect: 100-continue with a token bound elsewhere: refused without a 100, before any body', async () => {
    const token = await mint('strict', { method: 'POST', path: `${ORDERS}?x=1`, body: 'x' });
    const res = await exchange(gate.port, raw('POST', ORDERS, token, ['Content-Length: 1', 'Expect: 100-continue']), {
      quietMs: 300,
    });
    expect(res.statuses).toEqual([401]);
    expect(upstream.received).toHaveLength(0);
  });

  it('a chunked body over the bound with a request pipelined behind it: 413, the connection closed, neither forwarded', async () => {
    const token = await mint('strict', { method: 'POST', path: ORDERS, body: 'x' });
    const big = 'a'.repeat(MAX + 10);
    const framed = `${big.length.toString(16)}\r\n${big}\r\n0\r\n\r\n`;
    const res = await exchange(
      gate.port,
      Buffer.concat([
        raw('POST', ORDERS, token, ['Transfer-Encoding: chunked'], framed),
        raw('GET', `${ORDERS}?behind`, await mint('open')),
      ]),
    );
    expect(res.statuses).toEqual([413]);
    expect(res.closed).toBe(true);
    expect(upstream.received).toHaveLength(0);
  });

  it('a body read whole and refused binding_mismatch keeps the connection in step: the request behind it is its own', async () => {
    const token = await mint('strict', { method: 'POST', path: ORDERS, body: 'abd' });
    const res = await exchange(
      gate.port,
      Buffer.concat([
        raw('POST', ORDERS, token, ['Content-Length: 3'], 'abc'),
        raw('GET', `${ORDERS}?behind`, await mint('open'), ['Connection: close']),
      ]),
    );
    expect(res.statuses).toEqual([401, 200]);
    expect(upstream.received.map((r) => `${r.method} ${r.url}`)).toEqual([`GET ${ORDERS}?behind`]);
  });
});
