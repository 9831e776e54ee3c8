// Tested in test/e2e/audit.test.ts.
import { parseAuditQuery } from '../operations/audit-reader.js';
import { invalid, type Handler } from './management-answer.js';
import { onlyParams } from './request-fields.js';

/**
 * GET /v1/audit (read token): the audit log, oldest first, a page at a time, through the one audit
 * reader `keygate audit` uses too (src/operations/audit-reader.ts). With the embedded store there is
 * no audit log (keys change only in the keys file): 501 audit_needs_redis, never an empty page that
 * would read as "nothing happened".
 */
const list: Handler = async ({ query }, deps) => {
  if (!deps.audit) return { error: 'audit_needs_redis' };
  const problems: string[] = [];
  const names = ['apiKey', 'owner', 'action', 'since', 'cursor', 'limit'] as const;
  onlyParams(query, names, problems);
  const parsed = parseAuditQuery(Object.fromEntries(names.map((n) => [n, query.get(n) ?? undefined])));
  if (parsed.problems) problems.push(...parsed.problems.map((p) => `query.${p}`));
  if (problems.length > 0 || !parsed.query) return invalid(problems);
  const page = await deps.audit.page(parsed.query);
  return { status: 200, body: page };
};

export const auditHandlers = { list } as const;
