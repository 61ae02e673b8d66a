import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Worker threads run compiled modules, from dist/ under vitest (src/events/worker-file.ts).
    globalSetup: ['test/helpers/build-workers.ts'],
    // Tests start real servers on loopback and child processes; 2 cores, so keep workers few.
    maxWorkers: 2,
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // The JSON report lets .ci/run print a plain 'N passed, N failed' line.
    reporters: ['default', 'json'],
    outputFile: { json: 'dist/test-results.json' },
  },
});
