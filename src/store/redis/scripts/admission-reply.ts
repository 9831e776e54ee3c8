// Tested in test/e2e/admit-script.test.ts, test/e2e/store-contract.test.ts.
import type { RateState } from '../../rate-limit.js';
import { ADMITTED, REPLAY, type Admission } from '../../store.js';

/** The admit script's reply (admit-script.ts) as an Admission: a request some budget applies to. */
export function parseAdmissionReply(reply: number[]): Admission {
  const outcome = reply[0];
  if (outcome === 1) return REPLAY;
  const rate: RateState[] = [];
  for (let i = 2; i + 2 < reply.length; i += 3)
    rate.push({ remaining: reply[i] ?? 0, resetUs: reply[i + 1] ?? 0, retryAfterUs: reply[i + 2] ?? 0 });
  if (outcome === 2) return { outcome: 'limited', refusedBy: reply[1] ?? 0, rate };
  return { outcome: 'admitted', rate };
}

/** The nonce's SET NX reply as an Admission: a request no budget applies to ("OK" = first use). */
export function parseNonceReply(reply: string | null): Admission {
  return reply === 'OK' ? ADMITTED : REPLAY;
}
