// Shared vitest settings for every package: tests live beside the code as *.test.ts, run in forks
// (onnxruntime and native addons do not like worker_threads pools) and never touch the network.
export const preset = {
  test: {
    include: ['src/**/*.test.ts'],
    pool: 'forks',
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
};
