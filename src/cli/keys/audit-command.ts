// Tested in test/e2e/audit.test.ts.
import { escapeUnprintable } from '../../keys/printable-text.js';
import { createAuditReader, parseAuditQuery } from '../../operations/audit-reader.js';
import type { AuditEntry } from '../../store/audit-entry.js';
import { UsageError } from '../cli-errors.js';
import { flag, str, type Command } from '../command-line.js';
import { JSON_OPTION, opt } from './key-context.js';

const DETAILS = `Reads the audit log: every key and owner change, oldest first, from the
Redis stream keygate:{keystore}:audit (about the last 100,000 changes), through
the same reader as the management API's GET /v1/audit. No entry holds a secret.
Exit status: 0 done, 1 Redis did not answer, 2 usage.`;

/** One line per entry: when, who, what, which key and owner, then why or what changed. */
function line(e: AuditEntry): string {
  const why = [
    e.reason !== undefined && `reason=${e.reason}`,
    e.changes && `changed=${e.changes.join(',')}`,
    e.url !== undefined && `url=${e.url}`,
    e.source !== undefined && `source=${e.source}`,
    e.detail,
  ].filter(Boolean);
  const cols = [e.at, e.actor, e.action, e.apiKey || '-', e.owner ?? '-', why.join('; ')];
  return `${escapeUnprintable(cols.join('  ').trimEnd())}\n`;
}

/** `keygate audit [--key K] [--owner O] [--since T] [--action A] [--json]`. */
export const auditCommand: Command = {
  spec: {
    name: 'audit',
    summary: 'print the audit log of key changes (oldest first; never a secret)',
    options: [
      opt('key', 'apiKey', "only this key's entries"),
      opt('owner', 'owner', "only entries of this owner's keys and its settings"),
      opt('action', 'action', 'only this action (create, update, rotate, end-grace, revoke, delete, ...)'),
      opt('since', 'time', 'only entries at or after this ISO 8601 time'),
      JSON_OPTION,
    ],
    details: DETAILS,
  },
  async run(p, io) {
    const parsed = parseAuditQuery({
      apiKey: str(p, 'key'),
      owner: str(p, 'owner'),
      action: str(p, 'action'),
      since: str(p, 'since'),
      limit: '1000',
    });
    if (parsed.problems) {
      const named = parsed.problems.map((x) => `--${x.replace(/^apiKey/, 'key')}`);
      throw new UsageError(named.join('; '));
    }
    const { store } = await io.openKeyStore(io.env);
    try {
      const reader = createAuditReader({ store });
      const json = flag(p, 'json');
      let first = true;
      if (json) io.out.write('[');
      for await (const entries of reader.all(parsed.query))
        for (const e of entries) {
          if (json) io.out.write(`${first ? '\n' : ',\n'}  ${JSON.stringify(e)}`);
          else io.out.write(line(e));
          first = false;
        }
      if (json) io.out.write(first ? ']\n' : '\n]\n');
      return 0;
    } finally {
      await store.close();
    }
  },
};
