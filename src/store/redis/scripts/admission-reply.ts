// Tested in test/e2e/admit-script.test.ts, test/e2e/store-contract.test.ts.
import type { RateState } from '../../rate-limit.js';
import { ADMITTED, REPLAY, type Admission, type CreditState } from '../../store.js';

/** The admit script's reply (admit-script.ts) as an Admission: a request some budget or credits apply to. */
export function parseAdmissionReply(reply: number[]): Admission {
  const outcome = reply[0];
  if (outcome === 1) return REPLAY;
  const n = reply[2] ?? 0;
  const rate: RateState[] = new Array<RateState>(n);
  for (let b = 0, i = 3; b < n; b++, i += 3)
    rate[b] = { remaining: reply[i] ?? 0, resetUs: reply[i + 1] ?? 0, retryAfterUs: reply[i + 2] ?? 0 };
  const from = 3 + 3 * n;
  if (reply.length <= from) {
    if (outcome === 2) return { outcome: 'limited', refusedBy: reply[1] ?? 0, rate };
    return { outcome: 'admitted', rate };
  }
  const credits: CreditState[] = [];
  let drained = 0;
  for (let i = from, j = 0; i + 2 < reply.length; i += 3, j++) {
    credits.push({ remaining: reply[i] ?? 0, refillInS: reply[i + 1] ?? -1 });
    if (reply[i + 2] === 1) drained |= 1 << j;
  }
  // A charge with credits but no budget: its rate is undefined, as for a request no budget applies to.
  const rates = n === 0 ? undefined : rate;
  if (outcome === 2) return { outcome: 'limited', refusedBy: reply[1] ?? 0, rate };
  if (outcome === 3) return { outcome: 'exhausted', refusedBy: reply[1] ?? 0, rate, credits };
  return { outcome: 'admitted', rate: rates, credits, ...(drained !== 0 && { drained }) };
}

/** The nonce's SET NX reply as an Admission: a request no budget applies to ("OK" = first use). */
export function parseNonceReply(reply: string | null): Admission {
  return reply === 'OK' ? ADMITTED : REPLAY;
}
