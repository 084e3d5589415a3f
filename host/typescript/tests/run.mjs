// Tests of the bundled @jigging/flow: an independent Run/1 host peer written
// here drives the components in ./components as child processes and checks
// the bytes, codes and exit status a host would see; JSON/1 is also checked
// directly. Run with `node host/typescript/tests/run.mjs`. Set
// FLOW_TS_RUNTIME="bun" or "deno run --allow-all" to run the components on
// another runtime (the peer itself always runs on Node).

import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import path from "node:path";
import fs from "node:fs";
import os from "node:os";
import * as json1 from "../flow/json1.js";
import * as contract from "../flow/contract.js";

const here = path.dirname(fileURLToPath(import.meta.url));
const runtime = (process.env.FLOW_TS_RUNTIME ?? "node").split(/\s+/).filter(Boolean);
const FRAME_LIMIT = 16_777_216;
const WAIT_MS = 10_000;

const component = (name) => path.join(here, "components", `${name}.js`);

function rootRequest(input, overrides = {}) {
  return {
    jsonrpc: "2.0",
    id: "host:1",
    method: "flow/run",
    params: {
      protocol: "run/1",
      input,
      settings: {},
      attachments: {},
      scratch: "/tmp/scratch",
      deadlineUnixMs: 1787558400000,
      ...overrides,
    },
  };
}

/** One component process and the host side of its Run/1 channel. */
class Peer {
  constructor(name) {
    const [command, ...args] = runtime;
    this.child = spawn(command, [...args, component(name)], { stdio: ["pipe", "pipe", "pipe"] });
    this.buffer = Buffer.alloc(0);
    this.frames = [];
    this.waiters = [];
    this.stderr = "";
    this.child.stdin.on("error", () => {});
    this.child.stderr.on("data", (chunk) => (this.stderr += chunk));
    this.child.stdout.on("data", (chunk) => {
      this.buffer = Buffer.concat([this.buffer, chunk]);
      let newline;
      while ((newline = this.buffer.indexOf(0x0a)) >= 0) {
        const line = this.buffer.subarray(0, newline).toString("utf8");
        this.buffer = this.buffer.subarray(newline + 1);
        this.frames.push(JSON.parse(line));
      }
      this.wake();
    });
    this.exited = new Promise((resolve) => this.child.on("close", (code) => resolve(code)));
    this.exited.then(() => this.wake());
    this.closed = false;
    this.exited.then(() => (this.closed = true));
  }

  wake() {
    const waiters = this.waiters;
    this.waiters = [];
    for (const wake of waiters) wake();
  }

  send(message) {
    this.sendRaw(Buffer.from(JSON.stringify(message) + "\n"));
  }

  sendRaw(bytes) {
    this.child.stdin.write(bytes);
  }

  /** The next frame from the component, or a failure after WAIT_MS. */
  async next() {
    const deadline = Date.now() + WAIT_MS;
    while (this.frames.length === 0) {
      if (this.closed) assert.fail(`component exited without another frame; stderr: ${this.stderr}`);
      if (Date.now() > deadline) assert.fail("no frame from the component");
      await new Promise((resolve) => {
        this.waiters.push(resolve);
        setTimeout(resolve, 100);
      });
    }
    return this.frames.shift();
  }

  /** Frames received within `ms` (the wire must otherwise stay quiet). */
  async quiet(ms = 150) {
    await new Promise((resolve) => setTimeout(resolve, ms));
    const frames = this.frames;
    this.frames = [];
    return frames;
  }

  /** Close stdin and return the exit status; stdout must hold no further bytes. */
  async finish() {
    this.child.stdin.end();
    const code = await Promise.race([
      this.exited,
      new Promise((resolve) => setTimeout(() => resolve("timeout"), WAIT_MS)),
    ]);
    if (code === "timeout") this.child.kill("SIGKILL");
    assert.deepEqual(this.frames, [], "no frames after the expected ones");
    assert.equal(this.buffer.length, 0, "stdout ends on a frame boundary");
    return code;
  }

  /** Answer one request frame with a result. */
  reply(request, result) {
    this.send({ jsonrpc: "2.0", id: request.id, result });
  }

  fail(request, code, message = code) {
    this.send({ jsonrpc: "2.0", id: request.id, error: { code: -32000, message, data: { code } } });
  }
}

const errorCode = (frame) => frame.error?.data?.code;

/** The component must exit by itself (stdin still open) with a fatal PROTOCOL_ERROR. */
async function protocolError(peer, reason) {
  const code = await Promise.race([
    peer.exited,
    new Promise((resolve) => setTimeout(() => resolve("timeout"), WAIT_MS)),
  ]);
  assert.notEqual(code, "timeout", "the component closes the channel without waiting for stdin EOF");
  assert.notEqual(code, 0);
  assert.match(peer.stderr, new RegExp(`PROTOCOL_ERROR: ${reason}`));
  assert.equal(await peer.finish(), code);
}

// --- Contract digests (Capability Contract/1 case 7) -----------------------------------------
// The known answers are the shared conformance/fixtures/contract-digests.json: the digests the
// standard and the reference publish, and RFC 8785's own edge cases.

const repo = path.resolve(here, "../../..");
const known = JSON.parse(fs.readFileSync(path.join(repo, "conformance/fixtures/contract-digests.json"), "utf8"));
const descriptorData = path.join(repo, "flow/tests/data");
const fromBits = (hex) => new DataView(Uint8Array.from(Buffer.from(hex, "hex")).buffer).getFloat64(0);

test("contract digests: every known descriptor digest comes out exactly, from bytes and from the value", () => {
  assert.ok(known.descriptors.length >= 7);
  for (const { file, kind, digest } of known.descriptors) {
    const bytes = fs.readFileSync(path.join(descriptorData, file));
    const compute = kind === "capability" ? contract.capabilityDigest : contract.channelDigest;
    assert.equal(compute(bytes), digest, file);
    assert.equal(compute(JSON.parse(bytes.toString("utf8"))), digest, file);
    assert.equal(compute(new Uint8Array(bytes)), digest, file);
  }
  assert.equal(contract.CAPABILITY_DOMAIN, "FLOW-Capability-Contract/1\0");
  assert.equal(contract.CHANNEL_DOMAIN, "FLOW-Channel-Contract/1\0");
  const store = fs.readFileSync(path.join(descriptorData, "session-store.capability.json"));
  assert.notEqual(contract.capabilityDigest(store), contract.channelDigest(store));
  const changed = { ...JSON.parse(store.toString("utf8")), version: "1.0.1" };
  assert.notEqual(contract.capabilityDigest(changed), contract.capabilityDigest(store));
});

test("contract digests: descriptor bytes outside JSON/1 or its byte bound are refused", () => {
  for (const text of ['{"a":1,"a":2}', "\ufeff{}", '{"n":1e21}']) {
    assert.throws(() => contract.capabilityDigest(Buffer.from(text)), json1.Json1Error, text);
  }
  assert.throws(() => contract.capabilityDigest(Uint8Array.of(0xff)), json1.Json1Error);
  const limit = contract.MAX_DESCRIPTOR_BYTES;
  assert.match(contract.capabilityDigest(Buffer.from("{}" + " ".repeat(limit - 2))), /^sha256:[0-9a-f]{64}$/);
  assert.throws(() => contract.capabilityDigest(Buffer.from("{}" + " ".repeat(limit - 1))), json1.Json1Error);
});

test("RFC 8785: canonical texts, UTF-16 key order, ECMAScript numbers, refusals", () => {
  for (const [text, expected] of known.canonical) assert.equal(contract.canonical(json1.parse(text)), expected, text);
  // U+10000 is D800 DC00 in UTF-16, so it sorts before U+FFFF.
  assert.equal(contract.canonical({ "\uffff": 1, "\u{10000}": 2, "\ue000": 3 }), '{"\u{10000}":2,"\ue000":3,"\uffff":1}');
  for (const [hex, expected] of known.numbers) assert.equal(json1.formatNumber(fromBits(hex)), expected, hex);
  assert.equal(contract.canonical(-0), "0");
  for (const text of known.refused) {
    assert.throws(() => contract.canonical(json1.parse(text)), json1.Json1Error, text);
  }
  for (const value of [1e21, NaN, Infinity, 2 ** 53, "\ud800", { k: undefined }, [1n], new Date(0)]) {
    assert.throws(() => contract.canonical(value), json1.Json1Error, String(value));
  }
});

// --- Type declarations ------------------------------------------------------------------------
// tsc is TypeScript 5.9.3 where .ci/setup installs it ($JIG_TYPESCRIPT_DIR, /opt/jig-typescript).

const tscPath = path.join(process.env.JIG_TYPESCRIPT_DIR ?? "/opt/jig-typescript", "node_modules/.bin/tsc");

function tsc(project) {
  assert.ok(fs.existsSync(tscPath), `${tscPath} is missing: run .ci/setup (or set JIG_TYPESCRIPT_DIR)`);
  const run = spawnSync(tscPath, ["--noEmit", "-p", project], { encoding: "utf8" });
  assert.equal(run.status, 0, `tsc --noEmit -p ${project}:\n${run.stdout}${run.stderr}`);
}

test("types: flow/*.d.ts type-check against typical use (tsc --noEmit)", () => {
  tsc(path.join(here, "..", "tsconfig.json"));
});

test("types: a consumer importing @jigging/flow and @jigging/flow/contract by name type-checks", () => {
  // The package linked where Node and tsc look for it, so `exports` and `types` are what resolve.
  const project = fs.mkdtempSync(path.join(os.tmpdir(), "flow-types-"));
  try {
    for (const file of ["consumer.ts", "package.json"]) {
      fs.copyFileSync(path.join(here, "package", file), path.join(project, file));
    }
    fs.writeFileSync(
      path.join(project, "tsconfig.json"),
      JSON.stringify({ extends: path.join(here, "..", "tsconfig.json"), files: ["consumer.ts"] }),
    );
    fs.mkdirSync(path.join(project, "node_modules", "@jigging"), { recursive: true });
    fs.symlinkSync(path.join(here, "..", "flow"), path.join(project, "node_modules", "@jigging", "flow"));
    tsc(project);
  } finally {
    fs.rmSync(project, { recursive: true, force: true });
  }
});

// --- JSON/1 ---------------------------------------------------------------------------------

test("JSON/1 parser rejects what JSON.parse accepts", () => {
  for (
    const bad of [
      '{"a":1,"a":2}',
      '"\\ud800"',
      '"\\udc00x"',
      "9007199254740992",
      "-9007199254740992",
      "1e400",
      "NaN",
      "Infinity",
      "\ufeff{}",
      "",
      "{} {}",
      "[1,]",
      "01",
      '"tab\there"',
    ]
  ) {
    assert.throws(() => json1.parse(bad), json1.Json1Error, bad);
  }
  assert.equal(json1.parse("9007199254740991"), 9007199254740991);
  assert.equal(json1.parse("1.5e3"), 1500);
  assert.equal(Object.is(json1.parse("-0"), 0), true, "-0 canonicalises as 0");
  assert.deepEqual(json1.parse('"\\ud83d\\ude00"'), "\u{1f600}");
  const magic = json1.parse('{"__proto__":{"x":1},"constructor":2}');
  assert.equal(Object.getPrototypeOf(magic), Object.prototype);
  assert.deepEqual(Object.keys(magic), ["__proto__", "constructor"]);
  assert.throws(() => json1.parse('{"__proto__":1,"__proto__":2}'), json1.Json1Error);
});

test("JSON/1 limits hold at the limit and reject one past it", () => {
  const nested = (depth) => "[".repeat(depth - 1) + "0" + "]".repeat(depth - 1);
  json1.parse(nested(json1.MAX_DEPTH));
  assert.throws(() => json1.parse(nested(json1.MAX_DEPTH + 1)), /depth/);
  const token = (length) => "0." + "1".repeat(length - 2);
  json1.parse(token(json1.MAX_NUMBER_TOKEN_BYTES));
  assert.throws(() => json1.parse(token(json1.MAX_NUMBER_TOKEN_BYTES + 1)), /128 bytes/);
  const named = (bytes) => `{"${"é".repeat(bytes / 2)}":0}`;
  json1.parse(named(json1.MAX_MEMBER_NAME_BYTES));
  assert.throws(() => json1.parse(named(json1.MAX_MEMBER_NAME_BYTES + 2)), /member name/);
  const array = (items) => (items === 0 ? "[]" : `[${new Array(items).fill("0").join(",")}]`);
  json1.parse(array(json1.MAX_ARRAY_ITEMS));
  assert.throws(() => json1.parse(array(json1.MAX_ARRAY_ITEMS + 1)), /65,536 items/);
  const object = (members) => `{${Array.from({ length: members }, (_, i) => `"${i}":0`).join(",")}}`;
  json1.parse(object(json1.MAX_OBJECT_MEMBERS));
  assert.throws(() => json1.parse(object(json1.MAX_OBJECT_MEMBERS + 1)), /65,536 members/);
  const text = (bytes) => `"${"x".repeat(bytes)}"`;
  json1.parse(text(json1.MAX_STRING_BYTES));
  assert.throws(() => json1.parse(text(json1.MAX_STRING_BYTES + 1)), /8388608/);
  // A root array of arrays: each full inner array is 65,536 nodes with its zeros.
  const nodes = (count) => {
    const inner = [];
    let remaining = count - 1;
    while (remaining > 0) {
      const size = Math.min(remaining, 65_536);
      inner.push(array(size - 1));
      remaining -= size;
    }
    return `[${inner.join(",")}]`;
  };
  json1.parse(nodes(json1.MAX_NODES));
  assert.throws(() => json1.parse(nodes(json1.MAX_NODES + 1)), /nodes/);
});

test("JSON/1 snapshots copy plain values and refuse the rest", () => {
  const source = { a: [1, { b: "c" }], d: null };
  const copy = json1.snapshot(source);
  assert.deepEqual(copy, source);
  assert.notEqual(copy.a, source.a);
  const cycle = {};
  cycle.self = cycle;
  for (
    const bad of [
      undefined,
      () => 1,
      1n,
      Symbol("s"),
      NaN,
      2 ** 53,
      new Date(0),
      new Map(),
      [1, , 3],
      { u: undefined },
      "\ud800",
      cycle,
    ]
  ) {
    assert.throws(() => json1.snapshot(bad), json1.Json1Error);
  }
});

// --- the standard component and the golden exchange ---------------------------------------

test("standard component: concurrent calls, declared capability error, exit 0", async () => {
  const peer = new Peer("standard");
  peer.send(rootRequest({ topic: "x" }));
  const first = await peer.next();
  const second = await peer.next();
  const byMethod = Object.fromEntries([first, second].map((frame) => [frame.method, frame]));
  assert.deepEqual(byMethod["flow/run-child"].params, {
    operationId: "research:1",
    slot: "research",
    intent: "Find a useful comparison target.",
    input: { topic: "x" },
  });
  assert.deepEqual(byMethod["capability/call"].params, {
    operationId: "store:1",
    slot: "artifacts",
    method: "write",
    input: { source: "research" },
  });
  assert.notEqual(first.id, second.id);
  peer.reply(byMethod["capability/call"], { value: { uri: "artifact://1" } });
  peer.reply(byMethod["flow/run-child"], { outcome: "found", output: { target: "y" } });
  const third = await peer.next();
  assert.deepEqual(third.params, {
    operationId: "missing:1",
    slot: "artifacts",
    method: "read",
    input: { uri: "artifact://missing" },
  });
  peer.reply(third, { error: { name: "not-found", data: null } });
  const root = await peer.next();
  assert.deepEqual(root, {
    jsonrpc: "2.0",
    id: "host:1",
    result: {
      outcome: "done",
      output: {
        research: { outcome: "found", output: { target: "y" } },
        stored: { uri: "artifact://1" },
        missing: "not-found",
      },
    },
  });
  assert.equal(await peer.finish(), 0);
});

test("root cancellation: one request/cancel per open call, quiet until settled, then CANCELLED", async () => {
  const peer = new Peer("standard");
  peer.send(rootRequest(null));
  const calls = [await peer.next(), await peer.next()];
  peer.send({ jsonrpc: "2.0", method: "request/cancel", params: { requestId: "host:1" } });
  const cancels = [await peer.next(), await peer.next()];
  assert.deepEqual(
    cancels.map((frame) => frame.params.requestId).sort(),
    calls.map((frame) => frame.id).sort(),
  );
  assert.ok(cancels.every((frame) => frame.method === "request/cancel" && !("id" in frame)));
  peer.fail(calls[0], "CANCELLED");
  assert.deepEqual(await peer.quiet(), [], "nothing while a cancelled call is open");
  peer.reply(calls[1], { value: null });
  const root = await peer.next();
  assert.equal(root.id, "host:1");
  assert.equal(root.error.code, -32000);
  assert.equal(errorCode(root), "CANCELLED");
  assert.equal(await peer.finish(), 0);
});

test("root cancellation reaches run.signal and the handler's calls", async () => {
  const peer = new Peer("probe");
  peer.send(rootRequest({ case: "wait-cancel" }));
  const calls = [await peer.next(), await peer.next()];
  peer.send({ jsonrpc: "2.0", method: "request/cancel", params: { requestId: "host:1" } });
  await peer.next();
  await peer.next();
  peer.reply(calls[0], { value: 1 });
  peer.reply(calls[1], { value: 2 });
  const root = await peer.next();
  assert.equal(errorCode(root), "CANCELLED");
  assert.equal(await peer.finish(), 0);
});

test("a handler ignoring root cancellation still ends CANCELLED after the grace", async () => {
  const peer = new Peer("probe");
  peer.send(rootRequest({ case: "ignore-cancel" }));
  await peer.quiet(100);
  peer.send({ jsonrpc: "2.0", method: "request/cancel", params: { requestId: "host:1" } });
  assert.equal(errorCode(await peer.next()), "CANCELLED");
  assert.equal(await peer.finish(), 0);
});

// --- protocol errors ------------------------------------------------------------------------

async function fatalAfter(frames, { expectReply, closeInput } = {}) {
  const peer = new Peer("matrix");
  for (const frame of frames) peer.sendRaw(typeof frame === "string" ? Buffer.from(frame) : frame);
  let reply = null;
  if (expectReply) reply = await peer.next();
  if (closeInput) return { reply, code: await peer.finish(), peer };
  await protocolError(peer, "");
  return { reply, code: await peer.exited, peer };
}

test("framing fixtures: valid frames answer -32600 as envelopes, invalid ones close", async () => {
  const fixtures = JSON.parse(fs.readFileSync("/work/shared/flow-reference/run-1-fixtures/framing.json", "utf8"));
  for (const { name, hex } of fixtures.valid) {
    const { reply, code } = await fatalAfter([Buffer.from(hex, "hex")], { expectReply: true });
    assert.equal(reply.error.code, -32600, name);
    assert.notEqual(code, 0, name);
  }
  const replies = {
    "empty-frame": -32700,
    "utf8-bom": -32700,
    "duplicate-member": -32700,
    "escaped-lone-surrogate": -32700,
    "unsafe-integral-token": -32700,
    "two-values-one-frame": -32700,
  };
  for (const { name, hex } of fixtures.invalid) {
    const expected = replies[name];
    const { reply, code, peer } = await fatalAfter([Buffer.from(hex, "hex")], {
      expectReply: expected !== undefined,
      closeInput: name === "eof-before-line-feed",
    });
    if (expected !== undefined) {
      assert.equal(reply.error.code, expected, name);
      assert.equal(reply.id, null, name);
    }
    assert.notEqual(code, 0, `${name} exits nonzero; stderr ${peer.stderr}`);
  }
});

test("a frame of exactly 16,777,216 bytes is accepted; one more byte closes without reply", async () => {
  const frameOf = (bytes) => {
    const head = rootRequest({ case: "none", pad: ["", ""] });
    const base = Buffer.byteLength(JSON.stringify(head));
    const fill = bytes - base;
    head.params.input.pad = ["x".repeat(Math.floor(fill / 2)), "x".repeat(fill - Math.floor(fill / 2))];
    const text = JSON.stringify(head);
    assert.equal(Buffer.byteLength(text), bytes);
    return Buffer.from(text + "\n");
  };
  const peer = new Peer("matrix");
  peer.sendRaw(frameOf(FRAME_LIMIT));
  assert.deepEqual(await peer.next(), { jsonrpc: "2.0", id: "host:1", result: { outcome: "done", output: null } });
  assert.equal(await peer.finish(), 0);
  const over = await fatalAfter([frameOf(FRAME_LIMIT + 1)]);
  assert.notEqual(over.code, 0);
  assert.match(over.peer.stderr, /frame exceeds 16,777,216 bytes/);
});

test("host-side methods get -32601 and the channel goes on; notifications are ignored", async () => {
  const peer = new Peer("matrix");
  peer.send({ jsonrpc: "2.0", id: "h:0", method: "capability/call", params: {} });
  assert.deepEqual(await peer.next(), {
    jsonrpc: "2.0",
    id: "h:0",
    error: { code: -32601, message: "Method not found: capability/call" },
  });
  peer.send({ jsonrpc: "2.0", method: "something/else", params: [] });
  peer.send({ jsonrpc: "2.0", method: "request/cancel", params: { requestId: "nothing:1" } });
  peer.send(rootRequest({ case: "none" }));
  assert.deepEqual(await peer.next(), { jsonrpc: "2.0", id: "host:1", result: { outcome: "done", output: null } });
  assert.equal(await peer.finish(), 0);
});

test("invalid root params get -32602 and the process ends with status 0", async () => {
  const peer = new Peer("matrix");
  peer.send(rootRequest(null, { protocol: "run/2" }));
  const reply = await peer.next();
  assert.equal(reply.id, "host:1");
  assert.equal(reply.error.code, -32602);
  assert.equal(await peer.finish(), 0);
});

test("a second flow/run gets -32600 and closes; scalar params and batches get -32600", async () => {
  const peer = new Peer("probe");
  peer.send(rootRequest({ case: "ignore-cancel" }));
  peer.send({ ...rootRequest(null), id: "host:2" });
  const reply = await peer.next();
  assert.equal(reply.error.code, -32600);
  assert.equal(reply.id, "host:2");
  await protocolError(peer, "host sent a second flow/run");
  const scalar = await fatalAfter(['{"jsonrpc":"2.0","id":"h:1","method":"flow/run","params":1}\n'], {
    expectReply: true,
  });
  assert.equal(scalar.reply.error.code, -32600);
  assert.equal(scalar.reply.id, "h:1");
  const batch = await fatalAfter(["[]\n"], { expectReply: true });
  assert.equal(batch.reply.error.code, -32600);
  const numeric = await fatalAfter(['{"jsonrpc":"2.0","id":7,"method":"flow/run","params":{}}\n'], {
    expectReply: true,
  });
  assert.equal(numeric.reply.error.code, -32600);
  assert.equal(numeric.reply.id, null);
});

test("malformed cancellation, unknown response IDs and bad results are fatal", async () => {
  const malformed = new Peer("matrix");
  malformed.send(rootRequest({ case: "one-flow" }));
  await malformed.next();
  malformed.send({ jsonrpc: "2.0", method: "request/cancel", params: { requestId: 5 } });
  await protocolError(malformed, "malformed request/cancel");

  const unknown = new Peer("matrix");
  unknown.send(rootRequest({ case: "one-flow" }));
  const call = await unknown.next();
  unknown.send({ jsonrpc: "2.0", id: "component:999", result: { outcome: "done", output: null } });
  await protocolError(unknown, "unknown or duplicate response ID component:999");
  assert.equal(call.method, "flow/run-child");

  const noOutput = new Peer("matrix");
  noOutput.send(rootRequest({ case: "one-flow" }));
  noOutput.reply(await noOutput.next(), { outcome: "done" });
  await protocolError(noOutput, "flow/run-child response: child result must be exactly");

  const standardError = new Peer("matrix");
  standardError.send(rootRequest({ case: "one-flow" }));
  const request = await standardError.next();
  standardError.send({ jsonrpc: "2.0", id: request.id, error: { code: -32601, message: "no" } });
  await protocolError(
    standardError,
    "flow/run-child response: peer answered a Run/1 request with JSON-RPC error -32601",
  );

  const duplicate = new Peer("matrix");
  duplicate.send(rootRequest({ case: "two-effects" }));
  const effect = await duplicate.next();
  duplicate.reply(effect, { value: 1 });
  await duplicate.next();
  duplicate.reply(effect, { value: 1 });
  await protocolError(duplicate, "unknown or duplicate response ID");
});

test("stdin EOF while the root is pending exits nonzero without a response", async () => {
  const peer = new Peer("matrix");
  peer.send(rootRequest({ case: "one-flow" }));
  await peer.next();
  assert.equal(await peer.finish(), 1);
  assert.match(peer.stderr, /CHANNEL_LOST: protocol stdin closed/);
});

// --- matrix behaviours ----------------------------------------------------------------------

test("fanout-65: never more than 64 calls on the wire", async () => {
  const peer = new Peer("matrix");
  peer.send(rootRequest({ case: "fanout-65" }));
  const first = [];
  for (let i = 0; i < 64; i++) first.push(await peer.next());
  assert.deepEqual(await peer.quiet(), [], "the 65th waits for a free slot");
  peer.reply(first[10], { value: 10 });
  const last = await peer.next();
  assert.deepEqual(last.params, { operationId: "fanout:65", slot: "sink", method: "write", input: { index: 64 } });
  for (const frame of [...first.filter((_, i) => i !== 10), last]) peer.reply(frame, { value: null });
  assert.deepEqual((await peer.next()).result, { outcome: "done", output: { settled: 65 } });
  assert.equal(await peer.finish(), 0);
  assert.equal(new Set([...first, last].map((frame) => frame.id)).size, 65);
});

test("request-lifetime: the 65,537th call is refused locally with no frame", async () => {
  const peer = new Peer("matrix");
  peer.send(rootRequest({ case: "request-lifetime" }));
  const ids = new Set();
  for (let i = 1; i <= 65_536; i++) {
    const frame = await peer.next();
    if (i === 1 || i === 65_536) assert.equal(frame.params.operationId, `lifetime:${i}`);
    ids.add(frame.id);
    peer.reply(frame, { value: null });
  }
  assert.equal(ids.size, 65_536);
  assert.deepEqual((await peer.next()).result.output, { accepted: 65_536, rejected: "RESOURCE_EXHAUSTED" });
  assert.equal(await peer.finish(), 0);
});

test("cancel-one-call: request/cancel for the aborted call, late response ignored", async () => {
  const peer = new Peer("matrix");
  peer.send(rootRequest({ case: "cancel-one-call" }));
  const child = await peer.next();
  const release = await peer.next();
  peer.reply(release, { value: null });
  const cancel = await peer.next();
  assert.deepEqual(cancel, { jsonrpc: "2.0", method: "request/cancel", params: { requestId: child.id } });
  assert.deepEqual(await peer.quiet(), [], "root result waits for the cancelled call to settle");
  peer.reply(child, { outcome: "done", output: "late" });
  assert.deepEqual((await peer.next()).result, { outcome: "done", output: "cancelled-locally" });
  assert.equal(await peer.finish(), 0);
});

test("abandoned-call: cancel, await, then EXECUTION_FAILED", async () => {
  const peer = new Peer("matrix");
  peer.send(rootRequest({ case: "abandoned-call" }));
  const child = await peer.next();
  peer.reply(await peer.next(), { value: null });
  assert.deepEqual(await peer.next(), { jsonrpc: "2.0", method: "request/cancel", params: { requestId: child.id } });
  peer.fail(child, "CANCELLED");
  assert.equal(errorCode(await peer.next()), "EXECUTION_FAILED");
  assert.equal(await peer.finish(), 0);
});

// --- handler results and errors --------------------------------------------------------------

async function rootOf(kase, extra = {}) {
  const peer = new Peer("probe");
  peer.send(rootRequest({ case: kase, ...extra }));
  const root = await peer.next();
  const code = await peer.finish();
  return { root, code, peer };
}

test("handler results: custom outcomes pass; invalid results become INVALID_RESULT", async () => {
  assert.deepEqual((await rootOf("custom-outcome")).root.result, { outcome: "needs-review", output: null });
  for (const kase of ["undefined-output", "extra-member", "bad-outcome", "unsafe-output", "map-output"]) {
    const { root, code } = await rootOf(kase);
    assert.equal(errorCode(root), "INVALID_RESULT", kase);
    assert.equal(code, 0);
  }
  // The output sits at depth 3 of the response frame (frame, result, output); `depth`
  // wrappings around null make depth + 1 levels, so 125 reaches depth 128 exactly.
  const atLimit = await rootOf("too-deep-output", { depth: 125 });
  assert.equal(atLimit.root.result.outcome, "done");
  assert.equal(errorCode((await rootOf("too-deep-output", { depth: 126 })).root), "INVALID_RESULT");
});

test("handler throws: wire codes are preserved, everything else is EXECUTION_FAILED", async () => {
  const preserved = (await rootOf("operation-error")).root;
  assert.deepEqual(preserved.error, {
    code: -32000,
    message: "nothing there",
    data: { code: "UNAVAILABLE", details: { why: "test" } },
  });
  for (const kase of ["local-code", "unknown-code", "bad-details", "throw"]) {
    assert.equal(errorCode((await rootOf(kase)).root), "EXECUTION_FAILED", kase);
  }
});

test("an ordinary error keeps its name, message and the component's own frames", async () => {
  const { root, peer } = await rootOf("type-error");
  assert.equal(errorCode(root), "EXECUTION_FAILED");
  assert.match(root.error.message, /^TypeError: /);
  const exception = root.error.data.details.exception;
  assert.equal(exception.type, "TypeError");
  assert.equal(`TypeError: ${exception.message}`, root.error.message);
  // Innermost first: the probe's frame, never the SDK's.
  assert.match(exception.stack[0], /probe\.js:\d+:\d+\)?$/, exception.stack.join("\n"));
  assert.ok(exception.stack.every((frame) => !frame.includes("flow/index.js")), exception.stack.join("\n"));
  assert.ok(exception.stack.length <= 16);
  assert.equal(typeof exception.framesOmitted, "number");
  // And on stderr.
  assert.match(peer.stderr, /TypeError: /);
  assert.match(peer.stderr, /probe\.js:\d+/);
});

test("an error text with a lone surrogate still reaches the host as JSON/1", async () => {
  const { root } = await rootOf("lone-surrogate");
  assert.equal(root.error.message, "RangeError: half \ufffd a pair");
  assert.equal(root.error.data.details.exception.message, "half \ufffd a pair");
});

test("application console and process.stdout output goes to stderr", async () => {
  const { root, code, peer } = await rootOf("output");
  assert.deepEqual(root.result, { outcome: "done", output: "clean" });
  assert.equal(code, 0);
  for (const line of ["console.log line", "console.info line", "stdout.write line"]) {
    assert.match(peer.stderr, new RegExp(line));
  }
});

test("context carries the invocation; invalid call arguments fail locally without frames", async () => {
  const echo = new Peer("probe");
  const attachments = { source: { path: "/w/source", access: "read" } };
  echo.send(rootRequest({ case: "echo" }, { settings: { strict: true }, attachments }));
  assert.deepEqual((await echo.next()).result.output, {
    input: { case: "echo" },
    settings: { strict: true },
    attachments,
    scratch: "/tmp/scratch",
    deadline: 1787558400000,
  });
  assert.equal(await echo.finish(), 0);

  const peer = new Peer("probe");
  peer.send(rootRequest({ case: "bad-arguments" }));
  const only = await peer.next();
  assert.equal(only.params.operationId, "after:1", "no earlier call reached the wire");
  assert.equal(only.id, "component:1", "refused calls consume no request ID");
  peer.reply(only, { value: "ok" });
  assert.deepEqual((await peer.next()).result.output, {
    slot: { type: "TypeError" },
    operationId: { type: "TypeError" },
    input: { type: "TypeError" },
    unknownField: { type: "TypeError" },
    intent: { type: "TypeError" },
    preAborted: { type: "OperationError", code: "CANCELLED" },
    after: { value: "ok" },
  });
  assert.equal(await peer.finish(), 0);
});

test("outbound values are snapshotted; capability and operational errors stay distinct", async () => {
  const snap = new Peer("probe");
  snap.send(rootRequest({ case: "snapshot-input" }));
  const call = await snap.next();
  assert.deepEqual(call.params.input, { value: 1 });
  snap.reply(call, { value: "v" });
  assert.equal((await snap.next()).result.output, "v");
  assert.equal(await snap.finish(), 0);

  const peer = new Peer("probe");
  peer.send(rootRequest({ case: "capability-errors" }));
  peer.reply(await peer.next(), { error: { name: "not-found", data: { uri: "x" } } });
  peer.fail(await peer.next(), "PERMISSION_DENIED");
  assert.deepEqual((await peer.next()).result.output, {
    declared: { type: "CapabilityError", errorName: "not-found" },
    operational: { type: "OperationError", code: "PERMISSION_DENIED" },
  });
  assert.equal(await peer.finish(), 0);
});

// --- channels ---------------------------------------------------------------------------------

const directGrants = {
  send: { endpoint: "ch:1/send", direction: "send", delivery: "direct" },
  receive: { endpoint: "ch:1/receive", direction: "receive", delivery: "direct", startSequence: 1 },
};

test("direct channel: create, contiguous reads, clean end", async () => {
  const peer = new Peer("probe");
  peer.send(rootRequest({ case: "direct-read" }));
  const create = await peer.next();
  assert.deepEqual([create.method, create.params], ["channel/create", {}]);
  peer.reply(create, directGrants);
  const first = await peer.next();
  assert.deepEqual([first.method, first.params], ["channel/next", { endpoint: "ch:1/receive" }]);
  assert.deepEqual(await peer.quiet(), [], "one read at a time, no prefetch");
  peer.reply(first, { item: { sequence: 1, value: "a" } });
  peer.reply(await peer.next(), { item: { sequence: 2, value: { b: 2 } } });
  peer.reply(await peer.next(), { end: { lastSequence: 2 } });
  assert.deepEqual((await peer.next()).result.output, { values: ["a", { b: 2 }], start: 1, direction: "send" });
  assert.equal(await peer.finish(), 0);
});

test("direct channel: an out-of-sequence item is fatal", async () => {
  const peer = new Peer("probe");
  peer.send(rootRequest({ case: "direct-read" }));
  peer.reply(await peer.next(), directGrants);
  peer.reply(await peer.next(), { item: { sequence: 2, value: "skipped one" } });
  await protocolError(peer, "channel/next response: read sequence 2, expected 1");
});

test("cancelling a read disposes the receiver; the read and release responses are drained", async () => {
  const peer = new Peer("probe");
  peer.send(rootRequest({ case: "read-cancel" }));
  peer.reply(await peer.next(), directGrants);
  const read = await peer.next();
  const release = await peer.next();
  assert.deepEqual([release.method, release.params], ["channel/release", { endpoint: "ch:1/receive" }]);
  peer.reply(release, { status: "released" });
  assert.deepEqual(await peer.quiet(), [], "the root waits for the cancelled read's response");
  peer.reply(read, { item: { sequence: 1, value: "late" } });
  assert.deepEqual((await peer.next()).result.output, {
    first: { type: "OperationError", code: "CANCELLED" },
    after: { type: "OperationError", code: "DISCONNECTED" },
  });
  assert.equal(await peer.finish(), 0);
});

test("a failed read settles the receiver: with no close, no release and a later read answers locally", async () => {
  const peer = new Peer("probe");
  peer.send(rootRequest({ case: "failed-read" }));
  peer.reply(await peer.next(), directGrants);
  const read = await peer.next();
  assert.equal(read.method, "channel/next");
  peer.fail(read, "LAGGED");
  // The host holds the sticky cause: the root result comes next, not a channel/release.
  const root = await peer.next();
  assert.equal(root.method, undefined, `expected the root result, got ${JSON.stringify(root)}`);
  assert.deepEqual(root.result?.output, {
    first: { type: "OperationError", code: "LAGGED" },
    again: { type: "OperationError", code: "LAGGED" },
  });
  assert.equal(await peer.finish(), 0);
});

test("closing a receiver after its failed read sends one release and takes the failed answer", async () => {
  const peer = new Peer("probe");
  peer.send(rootRequest({ case: "failed-read-close" }));
  peer.reply(await peer.next(), directGrants);
  peer.fail(await peer.next(), "LAGGED");
  const release = await peer.next();
  assert.deepEqual([release.method, release.params], ["channel/release", { endpoint: "ch:1/receive" }]);
  assert.deepEqual(await peer.quiet(), [], "close waits for the release's answer");
  peer.reply(release, { status: "failed", code: "LAGGED" });
  // The second close joins the first: the root result comes next, not another release.
  const root = await peer.next();
  assert.equal(root.method, undefined, `expected the root result, got ${JSON.stringify(root)}`);
  assert.deepEqual(root.result?.output, {
    first: { type: "OperationError", code: "LAGGED" },
    closed: { value: "closed" },
    closedAgain: { value: "closed" },
    again: { type: "OperationError", code: "LAGGED" },
  });
  assert.equal(await peer.finish(), 0);
});

/** Start a probe `kase` up to a held broadcast subscription (2 requests issued). */
async function holdingASubscription(t, kase) {
  const peer = new Peer("probe");
  // A failed assertion must not leave the component holding the suite open.
  t.after(() => peer.closed || peer.child.kill("SIGKILL"));
  peer.send(rootRequest({ case: kase }));
  const create = await peer.next();
  assert.equal(create.method, "channel/create");
  peer.reply(create, { send: { endpoint: "b:w", direction: "send", delivery: "broadcast" }, source: "b:src" });
  const subscribe = await peer.next();
  assert.equal(subscribe.method, "channel/subscribe");
  peer.reply(subscribe, { endpoint: "b:r", direction: "receive", delivery: "broadcast", startSequence: 1 });
  return peer;
}

test("settlement reserve: a held endpoint keeps one of the 64 window slots for its release", async (t) => {
  // Run/1 §1, SDK §6: ordinary calls leave one slot free while an endpoint may need settling.
  const peer = await holdingASubscription(t, "settlement-reserve-window");
  const calls = [];
  for (let i = 0; i < 63; i++) calls.push(await peer.next());
  assert.deepEqual([...new Set(calls.map((c) => c.method))], ["capability/call"]);
  const release = await peer.next();
  assert.deepEqual([release.method, release.params], ["channel/release", { endpoint: "b:r" }]);
  assert.deepEqual(await peer.quiet(), [], "the 64th call waits while the reserve is owed");
  peer.reply(release, { status: "released" });
  const last = await peer.next();
  assert.equal(last.method, "capability/call", "settled: the reserve's slot is free again");
  calls.push(last);
  assert.deepEqual(
    new Set(calls.map((c) => c.params.operationId)),
    new Set(Array.from({ length: 64 }, (_, i) => `reserve:${i + 1}`)),
  );
  for (const call of calls) peer.reply(call, { value: null });
  assert.deepEqual((await peer.next()).result?.output, { settled: 64 });
  assert.equal(await peer.finish(), 0);
});

test("settlement reserve: a held endpoint keeps one lifetime request for its release", async (t) => {
  // 2 requests for the subscription and 65,533 ordinary calls; the next is refused locally,
  // so the release is the 65,536th request.
  const peer = await holdingASubscription(t, "settlement-reserve-lifetime");
  const ordinary = 65_536 - 2 - 1;
  for (let i = 1; i <= ordinary; i++) {
    const call = await peer.next();
    assert.equal(call.method, "capability/call");
    peer.reply(call, { value: null });
  }
  const release = await peer.next();
  assert.deepEqual([release.id, release.method], ["component:65536", "channel/release"]);
  peer.reply(release, { status: "released" });
  assert.deepEqual((await peer.next()).result?.output, { accepted: ordinary, refused: ["RESOURCE_EXHAUSTED"] });
  assert.equal(await peer.finish(), 0);
});

test("a broadcast reader that lags is settled by its failed read while the other completes", async () => {
  const peer = new Peer("broadcast");
  peer.send(rootRequest(null));
  const receiver = (endpoint, startSequence) => ({ endpoint, direction: "receive", delivery: "broadcast", startSequence });
  const expect = async (method, params) => {
    const request = await peer.next();
    assert.deepEqual([request.method, request.params], [method, params]);
    return request;
  };
  peer.reply(await expect("channel/create", { delivery: "broadcast" }), {
    send: { endpoint: "b:w", direction: "send", delivery: "broadcast" },
    source: "b:src",
  });
  peer.reply(await expect("channel/subscribe", { source: "b:src" }), receiver("b:early", 1));
  peer.reply(await expect("channel/send", { endpoint: "b:w", value: "before-late" }), null);
  peer.reply(await expect("channel/subscribe", { source: "b:src" }), receiver("b:late", 2));
  peer.reply(await expect("channel/send", { endpoint: "b:w", value: "after-late" }), null);
  peer.reply(await expect("channel/close", { endpoint: "b:w" }), null);
  const reads = async () => {
    const both = [await peer.next(), await peer.next()];
    assert.deepEqual(both.map((r) => [r.method, r.params.endpoint]).sort(), [
      ["channel/next", "b:early"],
      ["channel/next", "b:late"],
    ]);
    return Object.fromEntries(both.map((r) => [r.params.endpoint, r]));
  };
  let read = await reads();
  peer.reply(read["b:early"], { item: { sequence: 1, value: "before-late" } });
  peer.reply(read["b:late"], { item: { sequence: 2, value: "after-late" } });
  read = await reads();
  peer.fail(read["b:early"], "LAGGED");
  assert.deepEqual(await peer.quiet(), [], "no release and no read for the reader that lagged");
  peer.reply(read["b:late"], { end: { lastSequence: 2 } });
  assert.deepEqual((await peer.next()).result?.output, {
    early: { start: 1, values: ["before-late"], complete: false },
    late: { start: 2, values: ["after-late"], complete: true },
  });
  assert.equal(await peer.finish(), 0);
});

test("a handler returning with a pending read fails EXECUTION_FAILED after disposal settles", async () => {
  const peer = new Peer("probe");
  peer.send(rootRequest({ case: "abandoned-receiver" }));
  peer.reply(await peer.next(), directGrants);
  const read = await peer.next();
  const release = await peer.next();
  assert.equal(release.method, "channel/release");
  peer.reply(read, { end: { lastSequence: 0 } });
  peer.reply(release, { status: "ended", lastSequence: 0 });
  assert.equal(errorCode(await peer.next()), "EXECUTION_FAILED");
  assert.equal(await peer.finish(), 0);
});

test("a used or forged endpoint cannot be mapped into a call", async () => {
  const peer = new Peer("probe");
  peer.send(rootRequest({ case: "transfer-claimed" }));
  peer.reply(await peer.next(), directGrants);
  const send = await peer.next();
  assert.deepEqual(send.params, { endpoint: "ch:1/send", value: 1 });
  peer.reply(send, null);
  const release = await peer.next();
  assert.equal(release.method, "channel/release", "neither call reached the wire");
  peer.reply(release, { status: "released" });
  assert.deepEqual((await peer.next()).result.output, {
    transfer: { type: "TypeError" },
    forged: { type: "TypeError" },
  });
  assert.equal(await peer.finish(), 0);
});

// --- limits -------------------------------------------------------------------------------------

test("call argument limits: 128-byte operationId, 64-byte slot, 16,384-scalar intent pass; one more fails locally", async () => {
  const peer = new Peer("probe");
  peer.send(rootRequest({ case: "argument-limits" }));
  for (let i = 0; i < 3; i++) {
    const call = await peer.next();
    assert.equal(call.method, "flow/run-child");
    peer.reply(call, { outcome: "done", output: i });
  }
  const refused = { type: "TypeError" };
  assert.deepEqual((await peer.next()).result.output, {
    operationId: [{ value: { outcome: "done", output: 0 } }, refused],
    slot: [{ value: { outcome: "done", output: 1 } }, refused],
    intent: [{ value: { outcome: "done", output: 2 } }, refused],
  });
  assert.equal(await peer.finish(), 0);
});

test("root params: 256 attachments and channels pass, 257 get -32602", async () => {
  const attachments = (count) =>
    Object.fromEntries(Array.from({ length: count }, (_, i) => [`a${i}`, { path: `/w/${i}`, access: "read" }]));
  const channels = (count) =>
    Object.fromEntries(
      Array.from({ length: count }, (_, i) => [`c${i}`, { endpoint: `e:${i}`, direction: "send", delivery: "direct" }]),
    );
  for (
    const [overrides, expected] of [
      [{ attachments: attachments(256) }, "result"],
      [{ attachments: attachments(257) }, -32602],
      [{ channels: channels(256) }, "result"],
      [{ channels: channels(257) }, -32602],
    ]
  ) {
    const peer = new Peer("matrix");
    peer.send(rootRequest({ case: "none" }, overrides));
    const reply = await peer.next();
    if (expected === "result") assert.deepEqual(reply.result, { outcome: "done", output: null });
    else assert.equal(reply.error.code, expected);
    assert.equal(await peer.finish(), 0);
  }
});

test("root params: a grant's contract id follows the contract id grammar; IP literals get -32602", async () => {
  const granted = (id) => ({
    channels: {
      events: {
        endpoint: "e:1",
        direction: "send",
        delivery: "direct",
        contract: { id, version: "1.0.0", digest: `sha256:${"0".repeat(64)}` },
      },
    },
  });
  for (
    const [id, expected] of [
      ["https://example.org/updates", "result"],
      ["https://1.2.3.example/updates", "result"],
      ["https://192.168.0.1/updates", -32602],
      ["https://127.1/updates", -32602],
      ["https://0x7f.0.0.1/updates", -32602],
      ["https://1.2.3/updates", -32602],
      ["https://example.org", -32602],
    ]
  ) {
    const peer = new Peer("matrix");
    peer.send(rootRequest({ case: "none" }, granted(id)));
    const reply = await peer.next();
    if (expected === "result") assert.deepEqual(reply.result, { outcome: "done", output: null }, id);
    else assert.equal(reply.error?.code, expected, id);
    assert.equal(await peer.finish(), 0);
  }
});

test("error messages are cut to 1,024 Unicode scalar values", async () => {
  const { root } = await rootOf("long-message");
  assert.equal(Array.from(root.error.message).length, 1_024);
  assert.equal(root.error.message, "\u{1f600}".repeat(1_024));
});

test("host request lifetime: the 65,536th host request is served, the 65,537th is fatal", async () => {
  const peer = new Peer("matrix");
  const unknown =
    Array.from({ length: 65_535 }, (_, i) => JSON.stringify({ jsonrpc: "2.0", id: `h:${i}`, method: "unknown/method" }))
      .join("\n") + "\n";
  peer.sendRaw(Buffer.from(unknown));
  for (let i = 0; i < 65_535; i++) assert.equal((await peer.next()).error.code, -32601);
  peer.send(rootRequest({ case: "one-flow" }));
  assert.equal((await peer.next()).method, "flow/run-child", "the 65,536th request is the root");
  peer.send({ jsonrpc: "2.0", id: "h:last", method: "unknown/method" });
  await protocolError(peer, "host exceeded 65,536 requests");
});

test("a host request ID reused is fatal", async () => {
  const peer = new Peer("matrix");
  peer.send({ jsonrpc: "2.0", id: "host:1", method: "unknown/method" });
  assert.equal((await peer.next()).error.code, -32601);
  peer.send(rootRequest({ case: "one-flow" }));
  await protocolError(peer, "host reused request ID host:1");
});

test("a large root response crosses a pipe the host drains slowly", async () => {
  const peer = new Peer("probe");
  const big = "x".repeat(8_000_000);
  peer.send(rootRequest({ case: "echo", big }));
  peer.child.stdout.pause();
  await new Promise((resolve) => setTimeout(resolve, 300));
  peer.child.stdout.resume();
  const root = await peer.next();
  assert.equal(root.result.output.input.big.length, big.length);
  assert.equal(await peer.finish(), 0);
});
