import { describe, expect, it } from 'vitest';
import { claims, nowNonce, token } from '../helpers/tokens.js';

describe("the harness's token minting (scripts/harness/mint.mjs)", () => {
  it('never mints the same nonce twice in one process, however many come in one millisecond', () => {
    const nonces = Array.from({ length: 200_000 }, () => nowNonce());
    expect(new Set(nonces).size).toBe(nonces.length);
    // Increasing, as Keygate's own client mints them.
    for (let i = 1; i < nonces.length; i++) expect(BigInt(nonces[i]!) > BigInt(nonces[i - 1]!)).toBe(true);
  });

  it('a burst of tokens carries distinct nonces, each near the time it was minted', () => {
    const before = BigInt(Date.now()) * 1_000_000n;
    const nonces = Array.from({ length: 5_000 }, () => String(claims('good').nonce));
    const after = BigInt(Date.now() + 1) * 1_000_000n;
    expect(new Set(nonces).size).toBe(nonces.length);
    for (const n of nonces) {
      expect(BigInt(n) >= before).toBe(true);
      // 5,000 nanoseconds of bumps at most past the random sub-millisecond part.
      expect(BigInt(n) < after + 5_000n).toBe(true);
    }
    expect(token('good', 'secret').split('.')).toHaveLength(3);
  });

  it('moves a nonce by the offset asked for', () => {
    const now = BigInt(Date.now()) * 1_000_000n;
    const old = BigInt(nowNonce(-31_000));
    expect(now - old > 30_000n * 1_000_000n).toBe(true);
    expect(now - old < 32_000n * 1_000_000n).toBe(true);
  });
});
