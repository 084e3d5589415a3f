// A component used only by tests/run.mjs: `input.case` selects one SDK behaviour to observe.
import { CapabilityError, handle, OperationError } from "../../flow/index.js";

const describe = (error) =>
  error instanceof OperationError
    ? { type: "OperationError", code: error.code }
    : error instanceof CapabilityError
    ? { type: "CapabilityError", errorName: error.errorName }
    : { type: error?.name ?? typeof error };

async function outcome(promise) {
  try {
    return { value: await promise };
  } catch (error) {
    return describe(error);
  }
}

const cap = (run, operationId, input, options) =>
  run.callCapability({ operationId, slot: "sink", method: "write", input }, options);

const CASES = {
  echo: async (run) => ({
    outcome: "done",
    output: {
      input: run.input,
      settings: run.settings,
      attachments: run.attachments,
      scratch: run.scratch,
      deadline: run.deadlineUnixMs,
    },
  }),
  "custom-outcome": async () => ({ outcome: "needs-review", output: null }),
  "undefined-output": async () => ({ outcome: "done", output: undefined }),
  "extra-member": async () => ({ outcome: "done", output: null, extra: 1 }),
  "bad-outcome": async () => ({ outcome: "Done", output: null }),
  "unsafe-output": async () => ({ outcome: "done", output: 2 ** 53 }),
  "map-output": async () => ({ outcome: "done", output: new Map() }),
  "too-deep-output": async (run) => {
    let value = null;
    for (let i = 0; i < run.input.depth; i++) value = [value];
    return { outcome: "done", output: value };
  },
  "operation-error": async () => {
    throw new OperationError("UNAVAILABLE", "nothing there", { why: "test" });
  },
  "local-code": async () => {
    throw new OperationError("CHANNEL_LOST", "local only");
  },
  "unknown-code": async () => {
    throw new OperationError("NOPE", "not a code");
  },
  "bad-details": async () => {
    throw new OperationError("UNAVAILABLE", "bad details", { n: NaN });
  },
  throw: async () => {
    throw new Error("boom");
  },
  "lone-surrogate": async () => {
    throw new RangeError("half \ud800 a pair");
  },
  "type-error": async (run) => {
    return { outcome: "done", output: run.input.missing.data };
  },
  output: async () => {
    console.log("console.log line");
    console.info("console.info line");
    process.stdout.write("stdout.write line\n");
    return { outcome: "done", output: "clean" };
  },
  "bad-arguments": async (run) => {
    const results = {
      slot: await outcome(run.callCapability({ operationId: "a:1", slot: "Bad", method: "write", input: null })),
      operationId: await outcome(run.callCapability({ operationId: "-x", slot: "sink", method: "write", input: null })),
      input: await outcome(
        run.callCapability({ operationId: "a:1", slot: "sink", method: "write", input: { n: Infinity } }),
      ),
      unknownField: await outcome(
        run.callCapability({ operationId: "a:1", slot: "sink", method: "write", input: null, extra: 1 }),
      ),
      intent: await outcome(run.runChildFlow({ operationId: "a:1", slot: "child", intent: "", input: null })),
      preAborted: await outcome(cap(run, "a:1", null, { signal: AbortSignal.abort() })),
    };
    // None of those reached the wire; this one does.
    results.after = await outcome(cap(run, "after:1", null));
    return { outcome: "done", output: results };
  },
  "snapshot-input": async (run) => {
    const input = { value: 1 };
    const call = cap(run, "snap:1", input);
    input.value = 2;
    return { outcome: "done", output: await call };
  },
  "capability-errors": async (run) => ({
    outcome: "done",
    output: { declared: await outcome(cap(run, "e:1", null)), operational: await outcome(cap(run, "e:2", null)) },
  }),
  "wait-cancel": async (run) => {
    const calls = [cap(run, "w:1", null), cap(run, "w:2", null)];
    const signalled = new Promise((resolve) => run.signal.addEventListener("abort", resolve));
    const results = await Promise.all(calls.map(outcome));
    await signalled;
    throw new OperationError("CANCELLED", JSON.stringify(results));
  },
  "ignore-cancel": async (run) => {
    await new Promise((resolve) => run.signal.addEventListener("abort", resolve));
    return { outcome: "done", output: "ignored" };
  },
  "argument-limits": async (run) => {
    const child = (operationId, slot, intent) => outcome(run.runChildFlow({ operationId, slot, intent, input: null }));
    return {
      outcome: "done",
      output: {
        operationId: [await child("o".repeat(128), "child"), await child("o".repeat(129), "child")],
        slot: [await child("s:1", "s".repeat(64)), await child("s:2", "s".repeat(65))],
        intent: [
          await child("i:1", "child", "\u{1f600}".repeat(16_384)),
          await child("i:2", "child", "i".repeat(16_385)),
        ],
      },
    };
  },
  "long-message": async () => {
    throw new OperationError("UNAVAILABLE", "\u{1f600}".repeat(1_100));
  },
  "direct-read": async (run) => {
    const pair = await run.channel();
    const values = [];
    for await (const value of pair.receive) values.push(value);
    return { outcome: "done", output: { values, start: pair.receive.startSequence, direction: pair.send.direction } };
  },
  "read-cancel": async (run) => {
    const pair = await run.channel();
    const controller = new AbortController();
    const read = pair.receive.next({ signal: controller.signal });
    await new Promise((resolve) => setTimeout(resolve, 50));
    controller.abort();
    const first = await outcome(read);
    const after = await outcome(pair.receive.next());
    await pair.receive.close();
    return { outcome: "done", output: { first, after } };
  },
  "failed-read": async (run) => {
    const pair = await run.channel();
    const first = await outcome(pair.receive.next());
    const again = await outcome(pair.receive.next());
    return { outcome: "done", output: { first, again } };
  },
  "failed-read-close": async (run) => {
    const pair = await run.channel();
    const first = await outcome(pair.receive.next());
    const closed = await outcome(pair.receive.close().then(() => "closed"));
    const closedAgain = await outcome(pair.receive.close().then(() => "closed"));
    const again = await outcome(pair.receive.next());
    return { outcome: "done", output: { first, closed, closedAgain, again } };
  },
  "abandoned-receiver": async (run) => {
    const pair = await run.channel();
    pair.receive.next();
    await new Promise((resolve) => setTimeout(resolve, 50));
    return { outcome: "done", output: "abandoned" };
  },
  "transfer-claimed": async (run) => {
    const pair = await run.channel();
    await pair.send.send(1);
    const transfer = await outcome(
      run.callCapability({
        operationId: "t:1",
        slot: "sink",
        method: "write",
        input: null,
        channels: { events: pair.send },
      }),
    );
    const forged = await outcome(
      run.callCapability({
        operationId: "t:2",
        slot: "sink",
        method: "write",
        input: null,
        channels: { events: { endpoint: "x" } },
      }),
    );
    await pair.receive.close();
    return { outcome: "done", output: { transfer, forged } };
  },
  // 64 calls while a subscription may need settling, then its release.
  "settlement-reserve-window": async (run) => {
    const source = await run.channel({ delivery: "broadcast" });
    const reader = await source.subscribe();
    const calls = [];
    for (let i = 1; i <= 64; i++) calls.push(cap(run, `reserve:${i}`, null));
    await reader.close();
    return { outcome: "done", output: { settled: (await Promise.all(calls)).length } };
  },
  // Calls 63 at a time until refused while a subscription is held, then release it.
  "settlement-reserve-lifetime": async (run) => {
    const source = await run.channel({ delivery: "broadcast" });
    const reader = await source.subscribe();
    let accepted = 0;
    const refused = new Set();
    while (refused.size === 0) {
      const batch = [];
      for (let i = 1; i <= 63; i++) batch.push(outcome(cap(run, `reserve:${accepted + i}`, null)));
      for (const result of await Promise.all(batch)) {
        if ("value" in result) accepted++;
        else refused.add(result.code ?? result.type);
      }
    }
    await reader.close();
    return { outcome: "done", output: { accepted, refused: [...refused] } };
  },
};

await handle(async (run) => CASES[run.input.case](run));
