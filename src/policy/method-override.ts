// Tested in test/unit/load-policy.test.ts, test/unit/check-override.test.ts.
/**
 * Ways a client can ask the upstream to run another method than the one on
 * the request line. Common middleware (Express method-override, Rails, Laravel,
 * Symfony, ASP.NET, Google APIs) honours one or more of them, which would let a
 * POST authorized as a POST run a DELETE handler. The policy's methodOverride
 * lists those the upstream honours; src/pipeline/check-override.ts refuses the others.
 */
export const OVERRIDE_HEADERS = ['x-http-method-override', 'x-http-method', 'x-method-override'] as const;
export const OVERRIDE_PARAM = '_method';
export const OVERRIDE_NAMES: readonly string[] = [...OVERRIDE_HEADERS, OVERRIDE_PARAM];
