import type { KeyRecord } from './key-record.js';

/**
 * Whether two key records hold the same data (field by field, arrays in order). A reload keeps
 * the cached, prepared key of every record for which this holds, so it must never say "same"
 * for records that differ; an extra "different" only costs one cache refill.
 */
export function sameRecord(a: KeyRecord, b: KeyRecord): boolean {
  return sameValue(a, b);
}

function sameValue(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const ka = Object.keys(a).filter((k) => (a as Record<string, unknown>)[k] !== undefined);
  const kb = Object.keys(b).filter((k) => (b as Record<string, unknown>)[k] !== undefined);
  if (ka.length !== kb.length) return false;
  for (const k of ka) {
    if (!sameValue((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k])) return false;
  }
  return true;
}
