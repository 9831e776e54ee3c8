import type { KeyRecord } from './key-record.js';

/** Thrown by a store that cannot answer (Redis down, slow or erroring). Maps to 503. */
export class StoreUnavailableError extends Error {
  override readonly name = 'StoreUnavailableError';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/** Who changed which key, how and when. Never a secret. */
export interface AuditEntry {
  readonly at: string;
  readonly actor: string;
  readonly action: string;
  readonly apiKey: string;
  readonly id: string;
  readonly detail?: string;
}

/** A key change announced to every running instance (`null` = everything may have changed). */
export type KeyChangeListener = (apiKey: string | null) => void;

/**
 * What the request path and the CLI need from a store. Two implementations:
 * memory (embedded default, one process) and Redis (shared by replicas).
 * Both pass the same contract suite (test/store-contract.test.ts).
 */
export interface Store {
  readonly kind: 'memory' | 'redis';
  getKey(apiKey: string): Promise<KeyRecord | null>;
  listKeys(): Promise<KeyRecord[]>;
  putKey(record: KeyRecord): Promise<void>;
  /** Returns false when no such key existed. */
  deleteKey(apiKey: string): Promise<boolean>;
  /**
   * Atomically records `nonce` for `apiKey` for `ttlMs`. Returns true when it
   * was not already recorded (first use), false for a replay.
   */
  recordNonce(apiKey: string, nonce: string, ttlMs: number): Promise<boolean>;
  /** Subscribes to key changes made by any instance; returns an unsubscribe function. */
  onKeyChange(listener: KeyChangeListener): () => void;
  /** Appends an audit entry where the store keeps them (Redis stream `keygate:audit`); no-op in memory. */
  appendAudit(entry: AuditEntry): Promise<void>;
  /** Resolves when the store answers; rejects with StoreUnavailableError otherwise. */
  ping(): Promise<void>;
  /** How many keys the store holds (any state); /readyz is 503 "no_keys" at 0. */
  countKeys(): Promise<number>;
  close(): Promise<void>;
}
