// Tested in test/e2e/admit-script.test.ts, test/e2e/store-contract.test.ts.
import type { Admission } from '../store.js';

// Shared answers: the no-limit path allocates nothing per request for its verdict.
const ADMITTED: Admission = Object.freeze({ outcome: 'admitted', rate: undefined });
const REPLAY: Admission = Object.freeze({ outcome: 'replay' });

/** The admit script's reply (admit-script.ts) as an Admission: a key with a rate limit. */
export function parseAdmissionReply(reply: number[]): Admission {
  const [outcome, remaining = 0, resetUs = 0, retryAfterUs = 0] = reply;
  if (outcome === 1) return REPLAY;
  if (outcome === 2) return { outcome: 'limited', rate: { remaining, resetUs, retryAfterUs } };
  return { outcome: 'admitted', rate: { remaining, resetUs, retryAfterUs: 0 } };
}

/** The nonce's SET NX reply as an Admission: a key without a rate limit ("OK" = first use). */
export function parseNonceReply(reply: string | null): Admission {
  return reply === 'OK' ? ADMITTED : REPLAY;
}
