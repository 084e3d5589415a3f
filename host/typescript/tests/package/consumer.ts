// Type-level check of the package as a consumer imports it: by name, through
// flow/package.json's `exports` and `types` (tests/run.mjs links the package
// at node_modules/@jigging/flow and runs tsc --noEmit -p here).
import { handle, type JsonValue, type RunContext, type RunResult } from "@jigging/flow";
import { canonical, capabilityDigest, channelDigest, Json1Error } from "@jigging/flow/contract";

const bytes: Uint8Array = new TextEncoder().encode("{}");
const fromBytes: string = capabilityDigest(bytes);
const fromValue: string = channelDigest({ id: "https://example.org/c", version: "1.0.0" });
const text: string = canonical([1, "two", { three: null }]);

async function run(context: RunContext): Promise<RunResult> {
  const output: JsonValue = { fromBytes, fromValue, text, input: context.input };
  try {
    capabilityDigest(context.input);
  } catch (error) {
    if (!(error instanceof Json1Error)) throw error;
  }
  return { outcome: "done", output };
}

await handle(run);
