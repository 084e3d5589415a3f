// The Run/1 conformance "broadcast component", on @jigging/flow.
import { handle, OperationError } from "../../flow/index.js";

async function readAll(receiver) {
  const values = [];
  let complete = true;
  try {
    for await (const value of receiver) values.push(value);
  } catch (error) {
    if (!(error instanceof OperationError) || error.code !== "LAGGED") throw error;
    complete = false;
  }
  return { start: receiver.startSequence, values, complete };
}

await handle(async (run) => {
  const source = await run.channel({ delivery: "broadcast" });
  const early = await source.subscribe();
  await source.send.send("before-late");
  const late = await source.subscribe();
  await source.send.send("after-late");
  await source.send.close();
  const [earlyView, lateView] = await Promise.all([readAll(early), readAll(late)]);
  return { outcome: "done", output: { early: earlyView, late: lateView } };
});
