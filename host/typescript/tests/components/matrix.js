// The Run/1 conformance "matrix component", on @jigging/flow.
// `input.case` selects one behaviour; any other input returns done/null.
import { handle, OperationError } from "../../flow/index.js";

const LIFETIME_REQUESTS = 65_536;

const sink = (run, operationId, input) => run.callCapability({ operationId, slot: "sink", method: "write", input });
const release = (run, operationId) =>
  run.callCapability({ operationId, slot: "control", method: "release", input: null });

async function codeOf(promise) {
  try {
    return await promise;
  } catch (error) {
    if (error instanceof OperationError) return error.code;
    throw error;
  }
}

const CASES = {
  async "fanout-65"(run) {
    const calls = [];
    for (let index = 0; index < 65; index++) calls.push(sink(run, `fanout:${index + 1}`, { index }));
    await Promise.all(calls);
    return { settled: 65 };
  },
  async "operation-identity"(run) {
    const shared = (value) => sink(run, "shared:1", { value });
    const [first, second] = await Promise.all([shared("same"), shared("same")]);
    const replay = await shared("same");
    const conflict = await codeOf(shared("different"));
    if (conflict !== "OPERATION_CONFLICT") throw new Error(`a changed shared:1 call gave ${conflict}`);
    return { first, second, replay, conflict };
  },
  async "cancel-shared-waiter"(run) {
    const controller = new AbortController();
    const call = (options) =>
      run.callCapability(
        { operationId: "shared-cancel:1", slot: "sink", method: "write", input: { value: "shared" } },
        options,
      );
    const first = call({ signal: controller.signal });
    const second = call();
    await release(run, "release-shared-cancel:1");
    controller.abort();
    const cancellation = await codeOf(first);
    return { cancellation, survivor: await second };
  },
  async "uncertain-replay"(run) {
    const attempt = (operationId) => codeOf(sink(run, operationId, { value: "uncertain" }));
    const first = await attempt("uncertain:1");
    const replay = await attempt("uncertain:1");
    const fresh = await attempt("uncertain:2");
    return { first, replay, fresh };
  },
  async "request-lifetime"(run) {
    for (let index = 1; index <= LIFETIME_REQUESTS; index++) await sink(run, `lifetime:${index}`, null);
    const rejected = await codeOf(sink(run, `lifetime:${LIFETIME_REQUESTS + 1}`, null));
    if (rejected !== "RESOURCE_EXHAUSTED") throw new Error(`the 65,537th request gave ${JSON.stringify(rejected)}`);
    return { accepted: LIFETIME_REQUESTS, rejected };
  },
  async "one-flow"(run) {
    return await run.runChildFlow({ operationId: "child:1", slot: "child", input: null });
  },
  async "two-effects"(run) {
    const first = await sink(run, "first:1", { sequence: 1 });
    const second = await sink(run, "second:1", { sequence: 2 });
    return { first, second };
  },
  async "cancel-one-call"(run) {
    const controller = new AbortController();
    const child = run.runChildFlow(
      { operationId: "cancelled-child:1", slot: "child", input: null },
      { signal: controller.signal },
    );
    await release(run, "release-cancel:1");
    controller.abort();
    const code = await codeOf(child);
    if (code !== "CANCELLED") throw new Error(`the cancelled child gave ${JSON.stringify(code)}`);
    return "cancelled-locally";
  },
  async "abandoned-call"(run) {
    run.runChildFlow({ operationId: "abandoned-child:1", slot: "child", input: null });
    await release(run, "release-abandon:1");
    return "abandoned";
  },
};

await handle(async (run) => {
  const input = run.input;
  const kase = input !== null && typeof input === "object" && !Array.isArray(input) ? input.case : undefined;
  const behaviour = Object.hasOwn(CASES, kase) ? CASES[kase] : undefined;
  if (behaviour === undefined) return { outcome: "done", output: null };
  return { outcome: "done", output: await behaviour(run) };
});
