import { describe, expect, it } from 'vitest';
import { checkTime } from '../../src/pipeline/check-time.js';
import type { Claims } from '../../src/pipeline/decode-token.js';

const NOW = 1_795_330_124_122_000_000n; // 19 digits: beyond Number's exact range
const S = 1_000_000_000n;
const claims = (nonceNs: bigint, extra: Partial<Claims> = {}): Claims => ({
  ok: true,
  alg: 'HS256',
  sub: 'k',
  nonce: nonceNs.toString(),
  nonceNs,
  recvWindowSeconds: 30,
  exp: undefined,
  nbf: undefined,
  method: undefined,
  path: undefined,
  bodySha256: undefined,
  ...extra,
});

describe('checkTime: |nonce − now| < recv_window, exp and nbf', () => {
  const cases: Array<[string, Claims, boolean | string]> = [
    ['nonce equal to now', claims(NOW), true],
    ['29.999999999 s in the past', claims(NOW - 30n * S + 1n), true],
    ['exactly 30 s in the past', claims(NOW - 30n * S), 'nonce_window'],
    ['29.999999999 s in the future', claims(NOW + 30n * S - 1n), true],
    ['exactly 30 s in the future', claims(NOW + 30n * S), 'nonce_window'],
    ['1 ns beyond a 5 s window', claims(NOW - 5n * S - 1n, { recvWindowSeconds: 5 }), 'nonce_window'],
    ['inside a 60 s window', claims(NOW - 59n * S, { recvWindowSeconds: 60 }), true],
    ['nonce in milliseconds by mistake', claims(NOW / 1_000_000n), 'nonce_window'],
    ['nonce 0', claims(0n), 'nonce_window'],
    ['20-digit nonce', claims(99_999_999_999_999_999_999n), 'nonce_window'],
    ['differs only below 2^53 precision', claims(NOW + 1n), true],
    ['exp in the past', claims(NOW, { exp: Number(NOW / S) - 1 }), 'expired'],
    ['exp equal to now', claims(NOW, { exp: Number(NOW / S) + 0.122 }), 'expired'],
    ['exp in the future', claims(NOW, { exp: Number(NOW / S) + 10 }), true],
    ['nbf in the future', claims(NOW, { nbf: Number(NOW / S) + 10 }), 'expired'],
    ['nbf in the past', claims(NOW, { nbf: Number(NOW / S) - 10 }), true],
  ];
  it.each(cases)('%s', (_name, c, expected) => {
    const r = checkTime(c, NOW);
    if (expected === true) expect(r.ok).toBe(true);
    else expect(r).toEqual({ ok: false, code: 40106, reason: expected });
  });

  it('remembers the nonce for 2 × window + the skew margin, whatever the instance clock says', () => {
    // Independent of the instance's clock: the same for a nonce at, ahead of or behind `now`.
    expect(checkTime(claims(NOW), NOW)).toEqual({ ok: true, nonceTtlMs: 65_000 });
    expect(checkTime(claims(NOW + 10n * S), NOW)).toEqual({ ok: true, nonceTtlMs: 65_000 });
    expect(checkTime(claims(NOW - 10n * S), NOW)).toEqual({ ok: true, nonceTtlMs: 65_000 });
  });
});

describe('checkTime: the replay fence (nonces older than the last failover this instance saw)', () => {
  const FENCE = NOW - 10n * S;
  const cases: Array<[string, Claims, boolean | string]> = [
    ['a nonce 1 ns older than the fence', claims(FENCE - 1n), 'fenced'],
    ['a nonce at the fence', claims(FENCE), true],
    ['a nonce newer than the fence', claims(NOW), true],
    // The window decides first: only a token the window alone would admit counts as fenced.
    ['a nonce outside the window and older than the fence', claims(NOW - 31n * S), 'nonce_window'],
  ];
  it.each(cases)('%s', (_name, c, expected) => {
    const r = checkTime(c, NOW, FENCE);
    if (expected === true) expect(r.ok).toBe(true);
    else expect(r).toEqual({ ok: false, code: 40106, reason: expected });
  });

  it('without a fence (0n) nothing is fenced', () => {
    expect(checkTime(claims(NOW - 29n * S), NOW, 0n).ok).toBe(true);
  });
});
