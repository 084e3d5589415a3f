// The Run/1 conformance "standard component", on @jigging/flow.
import { CapabilityError, handle } from "../../flow/index.js";

await handle(async (run) => {
  const [research, stored] = await Promise.all([
    run.runChildFlow({
      operationId: "research:1",
      slot: "research",
      intent: "Find a useful comparison target.",
      input: run.input,
    }),
    run.callCapability({ operationId: "store:1", slot: "artifacts", method: "write", input: { source: "research" } }),
  ]);
  let missing;
  try {
    await run.callCapability({
      operationId: "missing:1",
      slot: "artifacts",
      method: "read",
      input: { uri: "artifact://missing" },
    });
    throw new Error("missing:1 returned a value instead of its declared error");
  } catch (error) {
    if (!(error instanceof CapabilityError)) throw error;
    missing = error.errorName;
  }
  return { outcome: "done", output: { research, stored, missing } };
});
