import { defineConfig } from 'vitest/config';

// One vitest run over every workspace package, so `pnpm test` ends with a single summary.
export default defineConfig({
  test: {
    projects: ['packages/*', 'apps/*', 'tooling/conformance', 'tooling/docs-check'],
  },
});
