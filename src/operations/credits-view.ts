// Tested in test/e2e/credits.test.ts.
import { MAX_CREDITS, type CreditsSpec, type CreditsView } from '../keys/credits.js';
import type { CreditState } from '../store/store.js';

/** The credits as shown (keys show, GET /v1/keys/{apiKey}, owners): what is left now and when the next refill comes. */
export function creditsView(spec: CreditsSpec, state: CreditState, nowMs: number): CreditsView {
  return {
    remaining: state.remaining,
    refill: spec.refill ?? null,
    nextRefillAt:
      state.refillInS < 0 ? null : new Date((Math.floor(nowMs / 1000) + state.refillInS) * 1000).toISOString(),
  };
}

/** A top-up's amount: a whole number from 1 to MAX_CREDITS, else a problem naming `credits.add`. */
export function checkTopUp(add: unknown, problems: string[]): number | undefined {
  if (typeof add === 'number' && Number.isInteger(add) && add >= 1 && add <= MAX_CREDITS) return add;
  problems.push(`credits.add: must be a whole number from 1 to ${MAX_CREDITS}`);
  return undefined;
}
