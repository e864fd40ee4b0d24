// Follows one durable stream to its end with the official TypeScript client, as a listener
// would: node follow.mjs <url> <out file> [long-poll|sse]. Prints {bytes, closed, offset}.
import { writeFileSync } from "node:fs"
import { stream } from "@durable-streams/client"

const [url, out, live = "long-poll"] = process.argv.slice(2)
const res = await stream({ url, live, ...(live === "sse" ? { encoding: "base64" } : {}) })
const chunks = []
const reader = res.bodyStream().getReader()
for (;;) {
  const { done, value } = await reader.read()
  if (done) break
  chunks.push(value)
}
const body = Buffer.concat(chunks)
writeFileSync(out, body)
console.log(JSON.stringify({ bytes: body.length, closed: res.streamClosed, offset: res.offset }))
