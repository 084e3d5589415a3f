// The Run/1 conformance "channel-wiring component", on @jigging/flow.
// `input.role` is root, worker or monitor; the root wires a contract-typed
// channel from a worker child to a monitor child.
import { handle, OperationError } from "../../flow/index.js";

async function root(run) {
  const updates = await run.channel({ contract: "./updates.json" });
  try {
    await run.runChildFlow({
      operationId: "incompatible",
      slot: "incompatible",
      input: null,
      channels: { events: updates.send },
    });
    throw new Error("the incompatible child accepted the events channel");
  } catch (error) {
    if (!(error instanceof OperationError) || error.code !== "INVALID_INPUT") throw error;
  }
  const monitorChannels = { events: updates.receive };
  if (Object.hasOwn(run.channels, "progress")) monitorChannels.progress = run.channels.progress;
  const stop = run.input.stop ?? false;
  const outcomes = await Promise.allSettled([
    run.runChildFlow({
      operationId: "worker",
      slot: "worker",
      input: { role: "worker" },
      channels: { events: updates.send },
    }),
    run.runChildFlow({
      operationId: "monitor",
      slot: "monitor",
      input: { role: "monitor", stop },
      channels: monitorChannels,
    }),
  ]);
  for (const outcome of outcomes) if (outcome.status === "rejected") throw outcome.reason;
  return { incompatible: true, work: outcomes[0].value, monitor: outcomes[1].value };
}

async function worker(run) {
  return run.callCapability({
    operationId: "answer",
    slot: "agent",
    method: "run",
    input: null,
    channels: { events: run.channels.events },
  });
}

async function monitor(run) {
  const events = run.channels.events;
  const progress = run.channels.progress;
  const stop = run.input.stop ?? false;
  const selected = [];
  let complete = true;
  try {
    // Leaving the read closes the receiver, as Python's `async with` does: after LAGGED that
    // is one release, which the host answers with the failure it recorded.
    try {
      for await (const update of events) {
        if (update !== null && typeof update === "object" && !Array.isArray(update) && Object.hasOwn(update, "text")) {
          selected.push(update.text);
          if (progress !== undefined) await progress.send(update.text);
          if (stop) {
            complete = false;
            break;
          }
        }
      }
    } finally {
      await events.close();
    }
  } catch (error) {
    if (!(error instanceof OperationError) || error.code !== "LAGGED") throw error;
    complete = false;
  }
  if (progress !== undefined) await progress.close();
  return { complete, selected };
}

const ROLES = { root, worker, monitor };

await handle(async (run) => {
  const role = run.input !== null && typeof run.input === "object" ? run.input.role : undefined;
  if (!Object.hasOwn(ROLES, role)) throw new TypeError("input.role must be root, worker or monitor");
  return { outcome: "done", output: await ROLES[role](run) };
});
