// The Run/1 conformance "channels component", on @jigging/flow.
import { handle, OperationError } from "../../flow/index.js";

await handle(async (run) => {
  const pair = await run.channel();
  const invoke = async () => {
    try {
      return await run.callCapability({
        operationId: "answer",
        slot: "worker",
        method: "run",
        input: run.input,
        channels: { events: pair.send },
      });
    } catch (error) {
      // Rejected admission may leave no producer to end the stream.
      await pair.receive.close().catch(() => {});
      throw error;
    }
  };
  const observe = async () => {
    const values = [];
    try {
      for await (const value of pair.receive) values.push(value);
    } catch (error) {
      if (!(error instanceof OperationError) || error.code !== "LAGGED") throw error;
      // The failed read settled the receiver; it is not closed, so nothing more is sent.
      return { complete: false, values };
    }
    return { complete: true, values };
  };
  const [work, observed] = await Promise.allSettled([invoke(), observe()]);
  if (work.status === "rejected") throw work.reason;
  if (observed.status === "rejected") throw observed.reason;
  return { outcome: "done", output: { ...observed.value, work: work.value } };
});
