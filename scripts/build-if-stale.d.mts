// Types of scripts/build-if-stale.mjs for the TypeScript tests that import it (tsconfig.json does not check JS).
export declare function staleReason(root: string): string | undefined;
