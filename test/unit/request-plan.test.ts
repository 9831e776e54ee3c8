import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { compileRequestPlan } from '../../src/gateway/request-plan.js';
import { loadPolicy } from '../../src/policy/load-policy.js';
import type { Policy } from '../../src/policy/policy.js';

function policyOf(yaml: string): Policy {
  const dir = mkdtempSync(join(tmpdir(), 'request-plan-'));
  try {
    writeFileSync(join(dir, 'policy.yaml'), yaml);
    const problems: string[] = [];
    const policy = loadPolicy(join(dir, 'policy.yaml'), problems);
    expect(problems).toEqual([]);
    return policy;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const POLICY = `
routes:
  - { method: GET, path: /api/v3/viewer/accounts, scopes: [accounts:read] }
  - { method: POST, path: /api/v3/orders, scopes: [orders:write], cost: 5 }
  - { method: DELETE, path: /api/v3/orders, scopes: [orders:cancel] }
public:
  - { method: GET, path: /api/v3/ping }
  - { method: GET, path: /status }
methodOverride: [X-HTTP-Method-Override]
`;

describe('compileRequestPlan: what a route needs, decided once per policy', () => {
  const plan = compileRequestPlan(policyOf(POLICY));

  it('authenticates an /api/v3/ route against its scopes and cost, and hands every request the same decision', () => {
    const d = plan.decide(['POST'], '/api/v3/orders');
    expect(d).toMatchObject({
      api: true,
      isPublic: false,
      route: { pattern: '/api/v3/orders', scopes: ['orders:write'], cost: 5 },
    });
    expect(plan.decide(['POST'], '/API/V3/orders/')).toBe(d);
    expect(Object.isFrozen(d)).toBe(true);
  });

  it('passes a public route with no key, inside and outside /api/v3/', () => {
    expect(plan.decide(['GET'], '/api/v3/ping')).toMatchObject({
      api: true,
      isPublic: true,
      route: { pattern: '/api/v3/ping' },
    });
    expect(plan.decide(['GET'], '/status')).toMatchObject({
      api: false,
      isPublic: true,
      route: { pattern: '/status' },
    });
  });

  it('leaves an unlisted /api/v3/ path to authentication and anything else outside it unmatched', () => {
    expect(plan.decide(['GET'], '/api/v3/nowhere')).toEqual({ api: true, isPublic: false, route: undefined });
    expect(plan.decide(['GET'], '/elsewhere')).toEqual({ api: false, isPublic: false, route: undefined });
  });

  it('an allowed override: both routes’ scopes and the larger cost, in a decision of its own', () => {
    const d = plan.decide(['POST', 'DELETE'], '/api/v3/orders');
    expect(d.route?.scopes).toEqual(expect.arrayContaining(['orders:write', 'orders:cancel']));
    expect(d.route?.cost).toBe(5);
    expect(plan.decide(['POST', 'DELETE'], '/api/v3/orders')).not.toBe(d);
    // Public for only one of the two methods is not public: it is authenticated.
    expect(plan.decide(['GET', 'POST'], '/api/v3/ping').isPublic).toBe(false);
  });

  it('carries the policy-wide decisions the steps read', () => {
    const policy = policyOf(`${POLICY}\ntimeEndpoint: false\nunlistedRoutes: allow\n`);
    const p = compileRequestPlan(policy);
    expect(p).toMatchObject({ policy, timeEndpoint: false, unlistedRoutes: 'allow', trustedProxies: null });
    expect(p.methodOverride).toBe(policy.methodOverride);
  });
});
