import { describe, expect, it } from 'vitest';
import {
  codeOf,
  deny,
  ERROR_CODES,
  errorBody,
  ERRORS,
  MANAGEMENT_ERRORS,
  REASONS,
  type ErrorCode,
  type Reason,
} from '../../src/errors.js';

/** The contract's table (the client contract document): status, code and message, fixed there. */
const CONTRACT: ReadonlyArray<[ErrorCode, number, string]> = [
  [40004, 401, 'Unauthorized'],
  [40106, 401, 'Invalid Token'],
  [40107, 400, 'Unexpected request header'],
  [10403, 403, 'Permission denied'],
  [10013, 404, 'Resource not found'],
];

/** A reason from each family, with the code the contract or Keygate's own table gives it. */
const SOME_REASONS: ReadonlyArray<[Reason, ErrorCode]> = [
  ['missing_header', 40004],
  ['bad_header_format', 40107],
  ['duplicate_header', 40107],
  ['malformed', 40106],
  ['replay', 40106],
  ['fenced', 40106],
  ['unknown_key', 10013],
  ['revoked', 10013],
  ['ip_denied', 10403],
  ['scope_denied', 10403],
  ['rate_limited', 10429],
  ['store_unavailable', 50300],
  ['overloaded', 50300],
  ['upstream_timeout', 50400],
  ['internal_error', 50000],
];

describe('ERRORS: the one catalogue', () => {
  it.each(CONTRACT)('%i is the contract’s: %i %s', (code, status, message) => {
    expect(ERRORS[code]).toEqual({ status, message });
    expect(errorBody(code)).toEqual({ code, message });
  });

  it('every code is "status" or "10"+status style and carries an error status', () => {
    for (const code of ERROR_CODES) {
      const { status } = ERRORS[code];
      expect(status, String(code)).toBeGreaterThanOrEqual(400);
      expect(status, String(code)).toBeLessThan(600);
      // Keygate's own codes are the status followed by two digits; the contract's and 10429 are given.
      if (![...CONTRACT.map(([c]) => c), 10429].includes(code)) expect(Math.floor(code / 100)).toBe(status);
    }
  });

  it('ERROR_CODES lists every code once, as numbers', () => {
    expect([...ERROR_CODES].sort()).toEqual(Object.keys(ERRORS).map(Number).sort());
    expect(new Set(ERROR_CODES).size).toBe(ERROR_CODES.length);
  });

  it('is frozen: no call site can add or change an entry', () => {
    expect(Object.isFrozen(ERRORS)).toBe(true);
    expect(Object.isFrozen(REASONS)).toBe(true);
    expect(Object.isFrozen(MANAGEMENT_ERRORS)).toBe(true);
    expect(Object.isFrozen(ERROR_CODES)).toBe(true);
  });
});

describe('REASONS and deny: a reason carries its one code', () => {
  it.each(SOME_REASONS)('%s is answered with %i', (reason, code) => {
    expect(codeOf(reason)).toBe(code);
    expect(deny(reason)).toEqual({ ok: false, code, reason });
  });

  it('every reason names a code in the catalogue and says what happened', () => {
    for (const [reason, { code, description }] of Object.entries(REASONS)) {
      expect(ERROR_CODES, reason).toContain(code);
      expect(description.length, reason).toBeGreaterThan(10);
      expect(reason, 'reasons are snake_case: they are metric label values').toMatch(/^[a-z]+(_[a-z0-9]+)*$/);
    }
  });

  it('every code in the catalogue is answered for some reason: none is dead', () => {
    const used = new Set(Object.values(REASONS).map((r) => r.code));
    expect(ERROR_CODES.filter((code) => !used.has(code))).toEqual([]);
  });

  it('deny returns one frozen verdict per reason: denying allocates nothing', () => {
    for (const reason of Object.keys(REASONS) as Reason[]) {
      const verdict = deny(reason);
      expect(Object.isFrozen(verdict), reason).toBe(true);
      expect(deny(reason), reason).toBe(verdict);
    }
  });
});

describe('MANAGEMENT_ERRORS: the management API’s answers', () => {
  const cases: ReadonlyArray<[string, number]> = [
    ['unauthorized', 401],
    ['read_only_token', 403],
    ['not_found', 404],
    ['conflict', 409],
    ['invalid_request', 400],
    ['body_too_large', 413],
    ['store_unavailable', 503],
    ['not_durable', 503],
    ['internal_error', 500],
  ];
  it.each(cases)('%s answers %i', (name, status) => {
    expect(MANAGEMENT_ERRORS[name as keyof typeof MANAGEMENT_ERRORS].status).toBe(status);
  });

  it('every answer has an error status and a message a client can show', () => {
    for (const [name, { status, message }] of Object.entries(MANAGEMENT_ERRORS)) {
      expect(status, name).toBeGreaterThanOrEqual(400);
      expect(message.length, name).toBeGreaterThan(5);
    }
  });

  it('the 503s say whether a retry is safe', () => {
    for (const [name, { status, message }] of Object.entries(MANAGEMENT_ERRORS))
      if (status === 503) expect(message, name).toMatch(/retry/);
  });
});
