// Types of scripts/test-index.mjs for the TypeScript tests that import it (tsconfig.json does not check JS).
export declare const TEST_INDEX_PATH: string;
export declare function importSpecifiers(text: string): string[];
export declare function importersBySource(
  root: string,
): Map<string, { tests: string[]; helpers: string[]; sources: string[] }>;
export declare function renderTestIndex(root: string): string;
