// Shared vitest settings for every package: tests live beside the code as *.test.ts, run in forks
// (onnxruntime and native addons do not like worker_threads pools) and never touch the network. Each file's
// temporary folders go into one folder of its own, removed after it (temp-folder.js).
export const preset = {
  test: {
    include: ['src/**/*.test.ts'],
    setupFiles: [new URL('./temp-folder.js', import.meta.url).pathname],
    pool: 'forks',
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
};
