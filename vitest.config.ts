import { defineConfig } from 'vitest/config';

// One vitest run over every workspace package, so `pnpm test` ends with a single summary.
export default defineConfig({
  test: {
    // Two files at a time on CI's two cores: most of a test's time is child processes starting, loopback servers and
    // waits, so two overlap well (measured: the server package 1.6× faster than one at a time).
    maxWorkers: 2,
    projects: ['packages/*', 'apps/*', 'tooling/conformance', 'tooling/docs-check'],
  },
});
