import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeKey, startKeygate, type RunningKeygate } from './helpers/keygate.js';
import { bearer, send } from './helpers/http.js';
import { token } from './helpers/tokens.js';
import { startUpstream, type RecordingUpstream } from './helpers/upstream.js';

const SECRET = 'log-secret-must-never-appear-0123';

describe('request logs', () => {
  let upstream: RecordingUpstream;
  let gate: RunningKeygate;
  beforeAll(async () => {
    upstream = await startUpstream();
    gate = await startKeygate({ upstream: upstream.url, keys: [makeKey({ apiKey: 'good', secret: SECRET, id: 'key-good' })] });
  });
  afterAll(async () => {
    await gate.close();
    await upstream.close();
  });

  it('write one line per request with code, reason and key id, and never a token or secret', async () => {
    const tokens = [token('good', SECRET), token('good', 'wrong-secret-0123456789'), token('nobody', SECRET)];
    await send(gate.url, '/api/v3/viewer/accounts', { headers: bearer(tokens[0]!) });
    await send(gate.url, '/api/v3/viewer/accounts', { headers: bearer(tokens[0]!) }); // replay
    await send(gate.url, '/api/v3/viewer/accounts', { headers: bearer(tokens[1]!) });
    await send(gate.url, '/api/v3/viewer/accounts', { headers: bearer(tokens[2]!) });
    await send(gate.url, '/api/v3/viewer/accounts', { headers: { authorization: `bearer ${tokens[0]}` } });
    upstream.handler = (_req, res) => res.socket?.destroy();
    await send(gate.url, '/api/v3/viewer/accounts', { headers: bearer(token('good', SECRET)) }).catch(() => undefined);
    await new Promise((r) => setTimeout(r, 50));

    const all = gate.logs.join('');
    for (const t of tokens) {
      for (const part of t.split('.')) expect(all).not.toContain(part);
    }
    expect(all).not.toContain(SECRET);
    expect(all.toLowerCase()).not.toContain('bearer');

    const lines = gate.logs.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.msg === 'request');
    expect(lines.map((l) => [l.code, l.reason ?? null])).toEqual([
      ['ok', null],
      [40106, 'replay'],
      [40106, 'bad_signature'],
      [10013, 'unknown_key'],
      [40107, 'bad_header_format'],
      [50200, 'upstream_error'],
    ]);
    expect(lines[0]).toMatchObject({ keyId: 'key-good', route: '/api/v3/viewer/accounts', status: 200, clientIp: '127.0.0.1', method: 'GET' });
    for (const l of lines) {
      expect(typeof l.requestId).toBe('string');
      expect(typeof l.durationMs).toBe('number');
    }
  });
});
