// The official Durable Streams server conformance suite, against the StreamTTS at DS_BASE_URL.
import { describe } from "vitest"
import { runConformanceTests } from "@durable-streams/server-conformance-tests"

const baseUrl = process.env.DS_BASE_URL
if (!baseUrl) throw new Error("set DS_BASE_URL to the running StreamTTS origin")

describe("StreamTTS /v1/stream", () => {
  runConformanceTests({
    baseUrl,
    longPollTimeoutMs: Number(process.env.DS_LONG_POLL_TEST_MS ?? 20_000),
  })
})
