// The suite's own CLI finds no test file under vitest 4: its README's programmatic use instead.
import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["conformance.test.mjs"],
    // one file, its tests in order: the suite's timing tests expect a quiet server
    fileParallelism: false,
    testTimeout: 30_000,
  },
})
