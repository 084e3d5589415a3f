// Type-level check of flow/index.d.ts (`deno check host/typescript/tests/types.ts`).
// Compiles only when the declared Run SDK/1 surface accepts ordinary use.
import {
  CapabilityError,
  type ChannelBroadcast,
  type ChannelPair,
  handle,
  type JsonValue,
  OperationError,
  type RunContext,
  type RunResult,
} from "../flow/index.js";

async function run(context: RunContext): Promise<RunResult> {
  const child: RunResult = await context.runChildFlow({
    operationId: "research:1",
    slot: "research",
    input: context.input,
  });
  const kept: JsonValue = child; // RunResult is itself a JsonValue.
  const pair: ChannelPair = await context.channel();
  const source: ChannelBroadcast = await context.channel({ delivery: "broadcast" });
  const reader = await source.subscribe({ signal: context.signal });
  await source.send.send({ n: 1 });
  await source.send.close();
  const seen: JsonValue[] = [];
  for await (const value of reader) seen.push(value);
  try {
    await context.callCapability(
      { operationId: "store:1", slot: "artifacts", method: "write", input: null, channels: { events: pair.send } },
      { signal: context.signal },
    );
  } catch (error) {
    if (error instanceof CapabilityError) return { outcome: "done", output: error.errorName };
    if (!(error instanceof OperationError) || error.code !== "CANCELLED") throw error;
  }
  const settings: Readonly<Record<string, JsonValue>> = context.settings;
  const deadline: number = context.deadlineUnixMs;
  return { outcome: "done", output: { kept, seen, settings, deadline, scratch: context.scratch } };
}

await handle(run);
