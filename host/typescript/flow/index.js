// @ts-self-types="./index.d.ts"
// @jigging/flow: the TypeScript/JavaScript projection of FLOW Run SDK/1,
// bundled with jig. `handle(handler)` serves exactly one Run/1 root
// `flow/run` over protocol stdin/stdout. Plain ESM with no dependencies, so it
// runs unchanged on Node 20, Bun >= 1.1 and Deno 2. It never exposes JSON-RPC
// envelopes, transport IDs, pending tables or host policy.

import process from "node:process";
import fs from "node:fs";
import * as json1 from "./json1.js";

// Run/1 §1 framing and request budgets.
const MAX_FRAME_BYTES = 16_777_216;
const MAX_PENDING_REQUESTS = 64;
const MAX_LIFETIME_REQUESTS = 65_536;
// Run/1 §1 request-ID and §2 LocalName grammars.
const MAX_WIRE_ID_BYTES = 128;
const MAX_LOCAL_NAME_BYTES = 64;
// Run/1 §3 and §4 field bounds.
const MAX_ATTACHMENTS = 256;
const MAX_CHANNELS = 256;
const MAX_INTENT_CHARS = 16_384;
// Run/1 §7: JSON-RPC error message length in Unicode scalar values.
const MAX_ERROR_MESSAGE_CHARS = 1_024;
// How long a cancelled root waits for its handler once the wire is quiet.
const CANCEL_HANDLER_GRACE_MS = 2_000;
// Exit status when the root never received a published response.
const EXIT_FAILURE = 1;

const PROTOCOL = "run/1";
const JSONRPC = "2.0";
const PARSE_ERROR = -32700;
const INVALID_REQUEST = -32600;
const METHOD_NOT_FOUND = -32601;
const INVALID_PARAMS = -32602;
const INTERNAL_ERROR = -32603;
const OPERATION_ERROR = -32000;
const STANDARD_ERROR_CODES = new Set([PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, INTERNAL_ERROR]);

// The thirteen operational codes that may cross the wire (Run/1 §7).
const WIRE_CODES = new Set([
  "CANCELLED",
  "DEADLINE_EXCEEDED",
  "OWNER_CLOSED",
  "OPERATION_CONFLICT",
  "UNAVAILABLE",
  "PERMISSION_DENIED",
  "RESOURCE_EXHAUSTED",
  "INVALID_INPUT",
  "INVALID_RESULT",
  "UNCERTAIN",
  "EXECUTION_FAILED",
  "LAGGED",
  "DISCONNECTED",
]);

const WIRE_ID = /^[A-Za-z0-9][A-Za-z0-9._:/-]*$/;
const LOCAL_NAME = /^[a-z0-9]+(?:-[a-z0-9]+)*$/;

const isWireId = (v) => typeof v === "string" && v.length >= 1 && v.length <= MAX_WIRE_ID_BYTES && WIRE_ID.test(v);
const isLocalName = (v) =>
  typeof v === "string" && v.length >= 1 && v.length <= MAX_LOCAL_NAME_BYTES && LOCAL_NAME.test(v);
const isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);
const hasOwn = (object, name) => Object.prototype.hasOwnProperty.call(object, name);
const keysAre = (object, required, optional = []) => {
  const keys = Object.keys(object);
  return (
    required.every((k) => hasOwn(object, k)) && keys.every((k) => required.includes(k) || optional.includes(k))
  );
};
const noop = () => {};

/** An operational failure: `code` is a Run/1 code, `details` JSON/1. */
export class OperationError extends Error {
  constructor(code, message, details) {
    super(message ?? code);
    this.name = "OperationError";
    this.code = code;
    this.details = details;
  }
}

/** A capability application error declared by the capability's contract. */
export class CapabilityError extends Error {
  constructor(errorName, data) {
    super(`capability error ${errorName}`);
    this.name = "CapabilityError";
    this.errorName = errorName;
    this.data = data;
  }
}

/** A JSON-RPC error message: 1..1,024 Unicode scalar values. */
function boundedMessage(text, fallback) {
  let message = typeof text === "string" ? text.toWellFormed?.() ?? text : "";
  if (!message) message = fallback;
  const scalars = Array.from(message);
  return scalars.length > MAX_ERROR_MESSAGE_CHARS ? scalars.slice(0, MAX_ERROR_MESSAGE_CHARS).join("") : message;
}

// --- closed shapes ------------------------------------------------------------------------

class InvalidParams extends Error {}
class InvalidResponse extends Error {}

function closed(value, required, optional, what) {
  if (!isObject(value)) throw new InvalidParams(`${what} must be an object`);
  for (const k of required) if (!hasOwn(value, k)) throw new InvalidParams(`${what} is missing ${k}`);
  for (const k of Object.keys(value)) {
    if (!required.includes(k) && !optional.includes(k)) throw new InvalidParams(`${what} has unknown member ${k}`);
  }
  return value;
}

function parseRootParams(params) {
  closed(
    params,
    ["protocol", "input", "settings", "attachments", "scratch", "deadlineUnixMs"],
    ["channels"],
    "flow/run params",
  );
  if (params.protocol !== PROTOCOL) throw new InvalidParams("protocol must be exactly run/1");
  if (!isObject(params.settings)) throw new InvalidParams("settings must be an object");
  const attachments = params.attachments;
  if (!isObject(attachments)) throw new InvalidParams("attachments must be an object");
  const names = Object.keys(attachments);
  if (names.length > MAX_ATTACHMENTS) throw new InvalidParams("more than 256 attachments");
  for (const name of names) {
    if (!isLocalName(name)) throw new InvalidParams(`attachment name ${JSON.stringify(name)} is not a LocalName`);
    const attachment = closed(attachments[name], ["path", "access"], [], `attachment ${name}`);
    if (typeof attachment.path !== "string" || !attachment.path) {
      throw new InvalidParams(`attachment ${name} path must be a nonempty string`);
    }
    if (attachment.access !== "read" && attachment.access !== "read-write") {
      throw new InvalidParams(`attachment ${name} access must be read or read-write`);
    }
  }
  if (typeof params.scratch !== "string" || !params.scratch) {
    throw new InvalidParams("scratch must be a nonempty string");
  }
  const deadline = params.deadlineUnixMs;
  if (!Number.isInteger(deadline) || deadline < 0) {
    throw new InvalidParams("deadlineUnixMs must be a nonnegative safe integer");
  }
  const channels = hasOwn(params, "channels") ? params.channels : {};
  if (!isObject(channels)) throw new InvalidParams("channels must be an object");
  const channelNames = Object.keys(channels);
  if (channelNames.length > MAX_CHANNELS) throw new InvalidParams("more than 256 channels");
  const seen = new Set();
  for (const name of channelNames) {
    if (!isLocalName(name)) throw new InvalidParams(`channel name ${JSON.stringify(name)} is not a LocalName`);
    const grant = parseGrant(channels[name], `channel ${name}`);
    if (seen.has(grant.endpoint)) throw new InvalidParams("channel endpoints must be distinct");
    seen.add(grant.endpoint);
  }
  return params;
}

// A host whose last label is a number (decimal, or hex after 0x) is an IPv4 literal in one of
// its spellings (127.1, 0x7f.0.0.1, 1.2.3), never a DNS name.
const CONTRACT_ID =
  /^https:\/\/(?![a-z0-9.-]*\.(?:[0-9]+|0x[0-9a-f]*)\/)[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)+\/(?!\.{1,2}(?:\/|$))[a-z0-9._~-]+(?:\/(?!\.{1,2}(?:\/|$))[a-z0-9._~-]+)*$/;
const VERSION = /^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$/;
const DIGEST = /^sha256:[0-9a-f]{64}$/;

/** Validate one closed endpoint grant (Run/1 §5.1). */
function parseGrant(grant, what) {
  if (!isObject(grant)) throw new InvalidParams(`${what} grant must be an object`);
  if (grant.direction === "send") {
    closed(grant, ["endpoint", "direction", "delivery"], ["contract"], what);
  } else if (grant.direction === "receive") {
    closed(grant, ["endpoint", "direction", "delivery", "startSequence"], ["contract"], what);
    if (!Number.isInteger(grant.startSequence) || grant.startSequence < 1) {
      throw new InvalidParams(`${what} startSequence must be a positive integer`);
    }
    if (grant.delivery === "direct" && grant.startSequence !== 1) {
      throw new InvalidParams(`${what} direct receivers start at sequence 1`);
    }
  } else {
    throw new InvalidParams(`${what} direction must be send or receive`);
  }
  if (!isWireId(grant.endpoint)) throw new InvalidParams(`${what} endpoint is not a request-ID token`);
  if (grant.delivery !== "direct" && grant.delivery !== "broadcast") {
    throw new InvalidParams(`${what} delivery must be direct or broadcast`);
  }
  if (hasOwn(grant, "contract")) {
    const contract = closed(grant.contract, ["id", "version", "digest"], [], `${what} contract`);
    if (typeof contract.id !== "string" || !CONTRACT_ID.test(contract.id)) {
      throw new InvalidParams(`${what} contract id is invalid`);
    }
    if (typeof contract.version !== "string" || !VERSION.test(contract.version)) {
      throw new InvalidParams(`${what} contract version is invalid`);
    }
    if (typeof contract.digest !== "string" || !DIGEST.test(contract.digest)) {
      throw new InvalidParams(`${what} contract digest is invalid`);
    }
  }
  return grant;
}

function parseRunResult(result) {
  if (!isObject(result) || !keysAre(result, ["outcome", "output"])) {
    throw new InvalidResponse("child result must be exactly {outcome, output}");
  }
  if (!isLocalName(result.outcome)) throw new InvalidResponse("child outcome is not a LocalName");
  return result;
}

function parseCapabilityResult(result) {
  if (isObject(result) && keysAre(result, ["value"])) return { value: result.value };
  if (isObject(result) && keysAre(result, ["error"])) {
    const error = result.error;
    if (isObject(error) && keysAre(error, ["name", "data"]) && isLocalName(error.name)) {
      return { error: new CapabilityError(error.name, error.data) };
    }
  }
  throw new InvalidResponse("capability result must be exactly {value} or {error:{name,data}}");
}

function parseOperationError(error) {
  if (!isObject(error) || !keysAre(error, [], ["code", "message", "data"])) {
    throw new InvalidResponse("error object has unknown members");
  }
  if (STANDARD_ERROR_CODES.has(error.code)) {
    throw new InvalidResponse(`peer answered a Run/1 request with JSON-RPC error ${error.code}`);
  }
  if (error.code !== OPERATION_ERROR) {
    throw new InvalidResponse(`unknown JSON-RPC error code ${JSON.stringify(error.code)}`);
  }
  const message = error.message;
  if (typeof message !== "string" || message.length < 1 || Array.from(message).length > MAX_ERROR_MESSAGE_CHARS) {
    throw new InvalidResponse("operational error message must be 1..1,024 characters");
  }
  const data = error.data;
  if (!isObject(data) || !keysAre(data, ["code"], ["details"])) {
    throw new InvalidResponse("operational error data must be {code, details?}");
  }
  if (!WIRE_CODES.has(data.code)) throw new InvalidResponse(`unknown operational code ${JSON.stringify(data.code)}`);
  return new OperationError(data.code, message, data.details);
}

// --- envelopes ------------------------------------------------------------------------------

class EnvelopeError extends Error {
  constructor(reason, replyId = null) {
    super(reason);
    this.replyId = replyId;
  }
}

/** Classify a decoded frame as request, notification or response. */
function classify(message) {
  if (!isObject(message)) throw new EnvelopeError("frame is not a JSON-RPC object");
  const validId = isWireId(message.id) ? message.id : null;
  if (message.jsonrpc !== JSONRPC) throw new EnvelopeError("jsonrpc must be exactly 2.0", validId);
  if (hasOwn(message, "method")) {
    if (!keysAre(message, ["jsonrpc", "method"], ["id", "params"])) {
      throw new EnvelopeError("unknown request member", validId);
    }
    if (typeof message.method !== "string") throw new EnvelopeError("method must be a string", validId);
    if (hasOwn(message, "params") && (message.params === null || typeof message.params !== "object")) {
      throw new EnvelopeError("params must be an object or array", validId);
    }
    if (!hasOwn(message, "id")) return { kind: "notification", method: message.method, params: message.params };
    if (validId === null) throw new EnvelopeError("request id must be a Run/1 request ID token");
    return { kind: "request", id: validId, method: message.method, params: message.params };
  }
  if (!keysAre(message, ["jsonrpc", "id"], ["result", "error"])) {
    throw new EnvelopeError("frame is neither request nor response", validId);
  }
  if (hasOwn(message, "result") === hasOwn(message, "error")) {
    throw new EnvelopeError("response needs exactly one of result and error", validId);
  }
  if (message.id !== null && validId === null) throw new EnvelopeError("response id must be a Run/1 request ID token");
  if (message.id === null && !hasOwn(message, "error")) throw new EnvelopeError("a success response needs an id");
  return { kind: "response", id: message.id, result: message.result, error: message.error };
}

// A frame of at most this many bytes cannot exceed any JSON/1 count limit.
const SMALL_FRAME_BYTES = 2 * json1.MAX_NODES;
const LF = new Uint8Array([0x0a]);

/** Encode one outbound frame (LF included) of snapshotted values, checking limits. */
function encodeFrame(message) {
  const payload = json1.encode(message);
  if (payload.length > MAX_FRAME_BYTES) throw new json1.Json1Error("frame exceeds 16,777,216 bytes");
  if (payload.length > SMALL_FRAME_BYTES && json1.measure(message) > json1.MAX_NODES) {
    throw new json1.Json1Error("frame exceeds 262,144 value nodes");
  }
  const frame = new Uint8Array(payload.length + 1);
  frame.set(payload);
  frame.set(LF, payload.length);
  return frame;
}

// --- transport --------------------------------------------------------------------------------

class Fatal extends Error {
  constructor(code, reason) {
    super(reason);
    this.code = code;
  }
}

const sleeper = typeof SharedArrayBuffer === "function" ? new Int32Array(new SharedArrayBuffer(4)) : null;

/** Write all bytes to a file descriptor, waiting out a nonblocking pipe's EAGAIN. */
function writeAll(fd, bytes) {
  let offset = 0;
  while (offset < bytes.length) {
    try {
      offset += fs.writeSync(fd, bytes, offset, bytes.length - offset);
    } catch (error) {
      if (error?.code !== "EAGAIN") throw error;
      if (sleeper) Atomics.wait(sleeper, 0, 0, 1);
    }
  }
}

const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

// --- the session: one Run/1 channel incarnation ---------------------------------------------

const QUEUED = "queued";
const WIRE = "wire";
const SETTLED = "settled";
const DROPPED = "dropped";

class Session {
  constructor(handler, outFd, exit) {
    this.handler = handler;
    this.outFd = outFd;
    this.exit = exit;
    this.stopped = false;
    this.hostIds = new Set();
    this.hostRequests = 0;
    this.rootId = null;
    this.nextId = 0;
    this.issued = 0;
    this.wire = new Map();
    this.queue = [];
    this.settlementQueue = [];
    this.idleWaiters = [];
    // Allocated or pending channel endpoints that may still need settlement.
    this.debt = 0;
    this.receivers = new Set();
    this.admissionClosed = null;
    this.rootCancelled = false;
    this.fatal = null;
    this.published = false;
    this.handlerSettled = null;
    this.controller = new AbortController();
    this.pendingChunks = [];
    this.pendingBytes = 0;
  }

  // --- reading ------------------------------------------------------------------------------

  onData(chunk) {
    if (this.stopped) return;
    let start = 0;
    for (;;) {
      const newline = chunk.indexOf(0x0a, start);
      if (newline < 0) {
        if (start < chunk.length) {
          this.pendingChunks.push(chunk.subarray(start));
          this.pendingBytes += chunk.length - start;
        }
        if (this.pendingBytes > MAX_FRAME_BYTES) {
          this.fail(new Fatal("PROTOCOL_ERROR", "frame exceeds 16,777,216 bytes"));
        }
        return;
      }
      const piece = chunk.subarray(start, newline);
      let frame;
      if (this.pendingChunks.length === 0) {
        frame = piece;
      } else {
        frame = new Uint8Array(this.pendingBytes + piece.length);
        let at = 0;
        for (const part of this.pendingChunks) {
          frame.set(part, at);
          at += part.length;
        }
        frame.set(piece, at);
        this.pendingChunks = [];
        this.pendingBytes = 0;
      }
      start = newline + 1;
      if (frame.length > MAX_FRAME_BYTES) {
        this.fail(new Fatal("PROTOCOL_ERROR", "frame exceeds 16,777,216 bytes"));
        return;
      }
      try {
        this.dispatch(frame);
      } catch (error) {
        if (!(error instanceof Fatal)) throw error;
        this.fail(error);
      }
      if (this.stopped) return;
    }
  }

  onEnd(reason) {
    if (this.stopped) return;
    if (reason === "error") this.fail(new Fatal("CHANNEL_LOST", "protocol stdin read failed"));
    else if (this.pendingBytes > 0) this.fail(new Fatal("PROTOCOL_ERROR", "EOF inside an incomplete frame"));
    else this.fail(new Fatal("CHANNEL_LOST", "protocol stdin closed"));
  }

  dispatch(raw) {
    let message;
    try {
      message = json1.parse(utf8.decode(raw));
    } catch (error) {
      if (!(error instanceof json1.Json1Error)) throw new Fatal("PROTOCOL_ERROR", "frame is not valid UTF-8");
      this.sendStandardError(null, PARSE_ERROR, `Parse error: ${error.message}`);
      throw new Fatal("PROTOCOL_ERROR", `frame is not JSON/1: ${error.message}`);
    }
    let envelope;
    try {
      envelope = classify(message);
    } catch (error) {
      if (!(error instanceof EnvelopeError)) throw error;
      this.sendStandardError(error.replyId, INVALID_REQUEST, error.message);
      throw new Fatal("PROTOCOL_ERROR", `invalid envelope: ${error.message}`);
    }
    if (envelope.kind === "request") this.onRequest(envelope);
    else if (envelope.kind === "notification") this.onNotification(envelope);
    else this.onResponse(envelope);
  }

  onRequest(envelope) {
    if (this.hostIds.has(envelope.id)) throw new Fatal("PROTOCOL_ERROR", `host reused request ID ${envelope.id}`);
    if (++this.hostRequests > MAX_LIFETIME_REQUESTS) throw new Fatal("PROTOCOL_ERROR", "host exceeded 65,536 requests");
    this.hostIds.add(envelope.id);
    if (envelope.method !== "flow/run") {
      this.sendStandardError(envelope.id, METHOD_NOT_FOUND, `Method not found: ${envelope.method}`);
      return;
    }
    if (this.rootId !== null) {
      this.sendStandardError(envelope.id, INVALID_REQUEST, "second flow/run");
      throw new Fatal("PROTOCOL_ERROR", "host sent a second flow/run");
    }
    this.rootId = envelope.id;
    let params;
    try {
      params = parseRootParams(envelope.params);
    } catch (error) {
      if (!(error instanceof InvalidParams)) throw error;
      const message = boundedMessage(`Invalid params: ${error.message}`, "Invalid params");
      this.publish({ jsonrpc: JSONRPC, id: envelope.id, error: { code: INVALID_PARAMS, message } });
      return;
    }
    this.startHandler(params);
  }

  onNotification(envelope) {
    if (envelope.method !== "request/cancel") return;
    const params = envelope.params;
    if (!isObject(params) || !keysAre(params, ["requestId"]) || !isWireId(params.requestId)) {
      throw new Fatal("PROTOCOL_ERROR", "malformed request/cancel");
    }
    if (params.requestId === this.rootId) this.cancelRoot();
  }

  onResponse(envelope) {
    if (envelope.id === null) {
      throw new Fatal("PROTOCOL_ERROR", `host rejected a component frame: ${JSON.stringify(envelope.error)}`);
    }
    const call = this.wire.get(envelope.id);
    if (call === undefined) throw new Fatal("PROTOCOL_ERROR", `unknown or duplicate response ID ${envelope.id}`);
    this.wire.delete(envelope.id);
    let outcome;
    try {
      outcome = envelope.error !== undefined
        ? { error: parseOperationError(envelope.error) }
        : call.parse(envelope.result);
    } catch (error) {
      if (!(error instanceof InvalidResponse)) throw error;
      throw new Fatal("PROTOCOL_ERROR", `${call.method} response: ${error.message}`);
    }
    call.state = SETTLED;
    call.release();
    call.closeWire();
    if (call.detached) {
      call.onLate?.(outcome);
    } else if (hasOwn(outcome, "error")) {
      call.reject(outcome.error);
    } else {
      call.resolve(outcome.value);
    }
    this.pump();
  }

  // --- writing ------------------------------------------------------------------------------

  write(bytes) {
    if (this.published || this.fatal !== null) throw new Fatal("CHANNEL_LOST", "write after the channel closed");
    try {
      writeAll(this.outFd, bytes);
    } catch (error) {
      throw new Fatal("CHANNEL_LOST", `protocol stdout write failed: ${error?.message ?? error}`);
    }
  }

  sendStandardError(id, code, message) {
    this.write(encodeFrame({ jsonrpc: JSONRPC, id, error: { code, message: boundedMessage(message, "error") } }));
  }

  /** Publish the one root terminal response, then exit 0. */
  publish(frame) {
    if (this.published || this.fatal !== null || this.stopped) return;
    let bytes;
    try {
      bytes = encodeFrame(frame);
    } catch (error) {
      bytes = encodeFrame(rootError(this.rootId, "INVALID_RESULT", `result frame: ${error.message}`));
    }
    try {
      this.write(bytes);
    } catch (error) {
      this.fail(error);
      return;
    }
    this.published = true;
    this.stopped = true;
    this.exit(0);
  }

  /** Fatal close: stop admission, fail pending calls, exit nonzero. */
  fail(fatal) {
    if (this.stopped || this.fatal !== null) return;
    this.fatal = fatal;
    this.admissionClosed = fatal.code;
    try {
      fs.writeSync(2, `@jigging/flow: ${fatal.code}: ${fatal.message}\n`);
    } catch {
      // Diagnostics are best effort.
    }
    const pending = [...this.queue, ...this.settlementQueue, ...this.wire.values()];
    this.queue = [];
    this.settlementQueue = [];
    this.wire.clear();
    for (const call of pending) {
      call.state = DROPPED;
      call.release();
      call.closeWire();
      if (!call.detached) call.reject(new OperationError(fatal.code, fatal.message));
    }
    if (!this.controller.signal.aborted) this.controller.abort(new OperationError(fatal.code, fatal.message));
    this.stopped = true;
    this.exit(EXIT_FAILURE);
  }

  // --- outbound calls -------------------------------------------------------------------------

  /**
   * Admit one request synchronously or throw; `call.promise` settles with it.
   * `retain` calls keep their request when the waiter goes away (settlement,
   * reads and allocations: no request/cancel); `reserved` ones may use the
   * channel settlement reserve; `internal` settlement is admitted even after
   * the handler settled, while the root response is unpublished. A detached
   * call's response goes to `onLate`.
   */
  admit(method, params, parse, { retain = false, reserved = false, internal = false, onLate = null, signal } = {}) {
    if (signal?.aborted) throw new OperationError("CANCELLED", "the call's signal was already aborted");
    if (internal) {
      if (this.fatal !== null || this.published) {
        throw new OperationError(this.admissionClosed ?? "OWNER_CLOSED", "the channel is closed");
      }
    } else if (this.admissionClosed !== null) {
      const code = this.admissionClosed;
      throw new OperationError(code, `calls are no longer admitted (${code})`);
    }
    const reserve = reserved || internal ? 0 : this.channelDebt;
    if (this.issued + reserve >= MAX_LIFETIME_REQUESTS) {
      throw new OperationError("RESOURCE_EXHAUSTED", "the 65,536 request lifetime budget is spent");
    }
    const id = `component:${this.nextId + 1}`;
    let frame;
    try {
      frame = encodeFrame({ jsonrpc: JSONRPC, id, method, params });
    } catch (error) {
      throw new TypeError(`${method} request is not JSON/1: ${error.message}`);
    }
    this.nextId++;
    this.issued++;
    const call = { id, method, frame, parse, state: QUEUED, detached: false, retain, internal, onLate, release: noop };
    call.promise = new Promise((resolve, reject) => {
      call.resolve = resolve;
      call.reject = reject;
    });
    call.promise.catch(noop);
    call.wireDone = new Promise((resolve) => {
      call.closeWire = resolve;
    });
    if (signal) {
      const onAbort = () => this.withdraw(call, "CANCELLED", "the call's signal was aborted");
      signal.addEventListener("abort", onAbort, { once: true });
      call.release = () => signal.removeEventListener("abort", onAbort);
    }
    (internal || reserved ? this.settlementQueue : this.queue).push(call);
    this.pump();
    return call;
  }

  /** Allocated or pending channel endpoints that may still need settlement. */
  get channelDebt() {
    return this.debt;
  }

  set channelDebt(value) {
    // A settled endpoint frees the window slot its reserve held: a call
    // queued behind it goes out now, not at some unrelated later response.
    const lowered = value < this.debt;
    this.debt = value;
    if (lowered) this.pump();
  }

  /** Admit, dispatch and await one ordinary component-originated request. */
  call(method, params, parse, signal) {
    try {
      return this.admit(method, params, parse, { signal }).promise;
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /**
   * Move queued calls onto the wire while fewer than 64 await responses.
   * Settlement goes first and may use every slot; ordinary calls leave one
   * slot free while channel endpoints may still need settling.
   */
  pump() {
    try {
      while (this.settlementQueue.length > 0 && this.wire.size < MAX_PENDING_REQUESTS) {
        this.putOnWire(this.settlementQueue.shift());
      }
      const limit = MAX_PENDING_REQUESTS - (this.channelDebt > 0 ? 1 : 0);
      while (this.admissionClosed === null && this.queue.length > 0 && this.wire.size < limit) {
        this.putOnWire(this.queue.shift());
      }
    } catch (error) {
      if (!(error instanceof Fatal)) throw error;
      this.fail(error);
      return;
    }
    if (this.isIdle()) {
      const waiters = this.idleWaiters;
      this.idleWaiters = [];
      for (const wake of waiters) wake();
    }
  }

  putOnWire(call) {
    this.write(call.frame);
    call.state = WIRE;
    this.wire.set(call.id, call);
  }

  isIdle() {
    return this.queue.length === 0 && this.settlementQueue.length === 0 && this.wire.size === 0;
  }

  idle() {
    if (this.isIdle()) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /** The waiter goes away: retain, drop a queued call, or tombstone a wire call with request/cancel. */
  withdraw(call, code, message) {
    if (call.detached || call.state === SETTLED || call.state === DROPPED) return;
    call.detached = true;
    call.release();
    call.reject(new OperationError(code, message));
    if (call.retain) return;
    if (call.state === QUEUED) {
      call.state = DROPPED;
      call.closeWire();
      const at = this.queue.indexOf(call);
      if (at >= 0) this.queue.splice(at, 1);
      this.pump();
      return;
    }
    try {
      this.write(encodeFrame({ jsonrpc: JSONRPC, method: "request/cancel", params: { requestId: call.id } }));
    } catch (error) {
      if (!(error instanceof Fatal)) throw error;
      this.fail(error);
    }
  }

  /** Withdraw every application call whose waiter is still live; returns how many. */
  abandonLiveCalls(code, message) {
    const live = [...this.queue, ...this.settlementQueue, ...this.wire.values()].filter(
      (call) => !call.internal && !call.detached,
    );
    for (const call of live) this.withdraw(call, code, message);
    return live.length;
  }

  /** Dispose receivers still active at handler settlement; returns how many. */
  abandonReceivers() {
    let abandoned = 0;
    for (const receiver of [...this.receivers]) if (startDisposal(receiver)) abandoned++;
    return abandoned;
  }

  // --- the root ---------------------------------------------------------------------------------

  startHandler(params) {
    const context = makeContext(this, params);
    const settled = (async () => {
      try {
        return { value: await this.handler(context) };
      } catch (error) {
        return { error };
      }
    })();
    this.handlerSettled = settled;
    settled.then((outcome) => this.supervise(outcome));
  }

  cancelRoot() {
    if (this.published || this.rootCancelled || this.fatal !== null || this.rootId === null) return;
    this.rootCancelled = true;
    this.admissionClosed = "CANCELLED";
    this.abandonLiveCalls("CANCELLED", "the root Run was cancelled");
    this.abandonReceivers();
    this.controller.abort(new OperationError("CANCELLED", "the root Run was cancelled"));
    // The handler may ignore the signal; once the wire is quiet it gets a grace period.
    this.idle().then(() => {
      let timer;
      const grace = new Promise((resolve) => {
        timer = setTimeout(resolve, CANCEL_HANDLER_GRACE_MS);
      });
      const handlerDone = this.handlerSettled ?? Promise.resolve();
      Promise.race([handlerDone, grace]).then(async () => {
        clearTimeout(timer);
        await this.idle();
        this.publish(rootError(this.rootId, "CANCELLED", "the root Run was cancelled"));
      });
    });
  }

  async supervise(outcome) {
    if (this.fatal !== null || this.published) return;
    if (this.admissionClosed === null) this.admissionClosed = "OWNER_CLOSED";
    const abandoned = this.abandonLiveCalls("OWNER_CLOSED", "the handler returned before this call settled") +
      this.abandonReceivers();
    await this.idle();
    if (this.fatal !== null || this.published) return;
    this.publish(this.rootFrame(outcome, abandoned));
  }

  rootFrame(outcome, abandoned) {
    const id = this.rootId;
    if (this.rootCancelled) return rootError(id, "CANCELLED", "the root Run was cancelled");
    if (hasOwn(outcome, "error")) return handlerError(id, outcome.error);
    if (abandoned) {
      return rootError(id, "EXECUTION_FAILED", `the handler returned while ${abandoned} owned call(s) were still open`);
    }
    let result;
    try {
      result = checkedResult(outcome.value);
    } catch (error) {
      return rootError(id, "INVALID_RESULT", `invalid handler result: ${error.message}`);
    }
    return { jsonrpc: JSONRPC, id, result };
  }
}

function checkedResult(result) {
  if (!isObject(result)) throw new TypeError("result must be an {outcome, output} object");
  const snap = json1.snapshot(result, 2);
  if (!keysAre(snap, ["outcome", "output"])) throw new TypeError("result must have exactly outcome and output");
  if (!isLocalName(snap.outcome)) throw new TypeError("outcome is not a LocalName");
  return snap;
}

function rootError(id, code, message, details) {
  const data = details === undefined ? { code } : { code, details };
  return { jsonrpc: JSONRPC, id, error: { code: OPERATION_ERROR, message: boundedMessage(message, code), data } };
}

function handlerError(id, error) {
  if (error instanceof OperationError && WIRE_CODES.has(error.code)) {
    let details;
    try {
      details = error.details === undefined ? undefined : json1.snapshot(error.details, 4);
      if (typeof error.message !== "string") throw new TypeError("message must be a string");
    } catch (problem) {
      return rootError(id, "EXECUTION_FAILED", `OperationError metadata is invalid: ${problem.message}`);
    }
    return rootError(id, error.code, error.message, details);
  }
  if (error instanceof OperationError) {
    return rootError(id, "EXECUTION_FAILED", `${String(error.code)}: ${error.message}`);
  }
  let text;
  try {
    text = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
  } catch {
    text = "the handler failed";
  }
  writeStack(error, text);
  return rootError(id, "EXECUTION_FAILED", text, exceptionDetails(error, text));
}

// What an ordinary error escaping the handler carries in the root error's
// details and on stderr: its name, message and the component's own frames,
// bounded so a deep recursion cannot fill the frame or the host's stderr tail.
const MAX_STACK_FRAMES = 16;
const MAX_FRAME_CHARS = 256;
const MAX_STDERR_CHARS = 16 * 1024;
const SDK_DIR = new URL(".", import.meta.url);

/** The frames of `error.stack`, innermost first, the SDK's and the runtime's left out. */
function ownFrames(error) {
  let stack;
  try {
    stack = error instanceof Error && typeof error.stack === "string" ? error.stack : "";
  } catch {
    stack = "";
  }
  const sdk = [SDK_DIR.href, decodeURIComponent(SDK_DIR.pathname)];
  // A file of the package is named by its path in the package (`flow.ts`),
  // so a stack names no host directory.
  const main = typeof process.argv[1] === "string" ? process.argv[1] : "";
  const root = main.startsWith("/") ? main.slice(0, main.lastIndexOf("/") + 1) : `${process.cwd()}/`;
  const frames = [];
  for (const line of stack.split("\n")) {
    const match = /^\s+at (.*)$/.exec(line);
    if (match === null) continue;
    const frame = match[1];
    if (sdk.some((dir) => frame.includes(dir)) || /\bnode:internal|\bext:|\(native\)|^native/.test(frame)) continue;
    const place = frame.replaceAll("file://", "");
    const relative = place.startsWith(root) ? place.slice(root.length) : place.replaceAll(`(${root}`, "(");
    frames.push(wellFormed(relative, MAX_FRAME_CHARS));
  }
  return frames;
}

function exceptionDetails(error, text) {
  const frames = ownFrames(error);
  const kept = frames.slice(0, MAX_STACK_FRAMES);
  let type = "";
  let message = text;
  try {
    if (error instanceof Error) {
      type = String(error.name);
      message = String(error.message);
    } else {
      type = typeof error;
    }
  } catch {
    // A hostile name or message: keep what the text said.
  }
  return {
    exception: {
      type: wellFormed(type, MAX_FRAME_CHARS),
      message: wellFormed(message, MAX_ERROR_MESSAGE_CHARS),
      stack: kept,
      framesOmitted: frames.length - kept.length,
    },
  };
}

/** At most `max` Unicode scalar values of `text`, lone surrogates replaced (JSON/1 refuses them). */
function wellFormed(text, max) {
  const scalars = Array.from(text.toWellFormed?.() ?? text);
  return scalars.length > max ? scalars.slice(0, max).join("") : scalars.join("");
}

/** The error and its frames on stderr, bounded; stderr is diagnostics only. */
function writeStack(error, text) {
  try {
    const frames = ownFrames(error).slice(0, 2 * MAX_STACK_FRAMES);
    let out = [text, ...frames.map((frame) => `    at ${frame}`)].join("\n");
    if (out.length > MAX_STDERR_CHARS) out = `${out.slice(0, MAX_STDERR_CHARS)}…`;
    process.stderr.write(`${out}\n`);
  } catch {
    // The root error still goes out.
  }
}

// --- channels (Run/1 §5.1, Run SDK/1 §9) -------------------------------------------------------
//
// Endpoint references are private SDK/host machinery: authors hold endpoint
// objects and pass them in call `channels` maps. A cancelled read, creation,
// subscription or disposal keeps its request until the host answers, and the
// root response waits for it.

const MAX_CONTRACT_REFERENCE_CHARS = 4_096;
const CONTRACT_REFERENCE = /^\.\/[^\\]+$/s;
const LOCAL_CODES = new Set(["PROTOCOL_ERROR", "CHANNEL_LOST"]);

const OPEN = "open";
const ENDED = "ended";
const FAILED = "failed";
const DISPOSING = "disposing";
const DISPOSED = "disposed";

// Private state of each endpoint object, keyed by the object itself.
const endpoints = new WeakMap();

function responseGrant(value, direction, delivery, what) {
  let grant;
  try {
    grant = parseGrant(value, what);
  } catch (error) {
    if (!(error instanceof InvalidParams)) throw error;
    throw new InvalidResponse(error.message);
  }
  if (grant.direction !== direction || grant.delivery !== delivery) {
    throw new InvalidResponse(`${what} must be a ${delivery} ${direction} grant`);
  }
  return grant;
}

function parseNull(result) {
  if (result !== null) throw new InvalidResponse("result must be null");
  return { value: null };
}

function sequenceOf(value, minimum) {
  if (!Number.isInteger(value) || value < minimum) throw new InvalidResponse("sequence must be an integer");
  return value;
}

function parseRelease(result) {
  if (isObject(result)) {
    const status = result.status;
    if (status === "released" && keysAre(result, ["status"])) return { value: { status } };
    if (status === "ended" && keysAre(result, ["status", "lastSequence"])) {
      return { value: { status, lastSequence: sequenceOf(result.lastSequence, 0) } };
    }
    if (status === "failed" && keysAre(result, ["status", "code"], ["details"]) && WIRE_CODES.has(result.code)) {
      return { value: { status, code: result.code, details: result.details } };
    }
  }
  throw new InvalidResponse("release result must be released, ended or failed");
}

function contractOf(grant) {
  return grant.contract === undefined ? undefined : Object.freeze({ ...grant.contract });
}

class ChannelSender {
  constructor(session, grant) {
    endpoints.set(this, { session, reference: grant.endpoint, claimed: false, receiver: null });
    this.direction = "send";
    this.delivery = grant.delivery;
    if (grant.contract !== undefined) this.contract = contractOf(grant);
    Object.freeze(this);
  }

  /** Resolves once the host accepted (validated and snapshotted) `value`. */
  async send(value, options) {
    const state = endpoints.get(this);
    let snapshot;
    try {
      snapshot = json1.snapshot(value, 3);
    } catch (error) {
      throw new TypeError(`channel value is not a JSON/1 value: ${error.message}`);
    }
    state.claimed = true;
    await state.session.call(
      "channel/send",
      { endpoint: state.reference, value: snapshot },
      parseNull,
      options?.signal,
    );
  }

  /** Seal the writer; a cancelled wait keeps the close request. */
  async close(options) {
    const state = endpoints.get(this);
    state.claimed = true;
    const call = state.session.admit("channel/close", { endpoint: state.reference }, parseNull, {
      retain: true,
      reserved: true,
      signal: options?.signal,
    });
    await call.promise;
  }
}

/** The read right of one direct channel or one broadcast subscription. */
class ChannelReceiver {
  constructor(session, grant, allocated) {
    const state = {
      session,
      reference: grant.endpoint,
      claimed: false,
      receiver: this,
      next: grant.startSequence,
      state: OPEN,
      active: false,
      read: null,
      cause: null,
      exposed: false,
      disposal: null,
    };
    endpoints.set(this, state);
    this.direction = "receive";
    this.delivery = grant.delivery;
    if (grant.contract !== undefined) this.contract = contractOf(grant);
    this.startSequence = grant.startSequence;
    Object.freeze(this);
    if (allocated) activate(state);
  }

  [Symbol.asyncIterator]() {
    return this;
  }

  /** One read at a time, no prefetch; a cancelled read disposes the receiver. */
  async next(options) {
    const state = endpoints.get(this);
    if (state.state === ENDED) return { done: true, value: undefined };
    if (state.state === FAILED) {
      state.exposed = true;
      throw state.cause;
    }
    if (state.state !== OPEN) throw new OperationError("DISCONNECTED", "the receiver was disposed");
    if (state.read !== null) throw new TypeError("a receiver has at most one pending read");
    const session = state.session;
    const expected = state.next;
    const parse = (result) => {
      if (isObject(result) && keysAre(result, ["item"])) {
        const item = result.item;
        if (isObject(item) && keysAre(item, ["sequence", "value"])) {
          if (sequenceOf(item.sequence, 1) !== expected) {
            throw new InvalidResponse(`read sequence ${item.sequence}, expected ${expected}`);
          }
          return { value: { done: false, value: item.value } };
        }
      }
      if (isObject(result) && keysAre(result, ["end"])) {
        const end = result.end;
        if (isObject(end) && keysAre(end, ["lastSequence"])) {
          if (sequenceOf(end.lastSequence, 0) !== expected - 1) {
            throw new InvalidResponse(`end at ${end.lastSequence}, expected ${expected - 1}`);
          }
          return { value: { done: true, value: undefined } };
        }
      }
      throw new InvalidResponse("read result must be {item:{sequence,value}} or {end:{lastSequence}}");
    };
    const call = session.admit("channel/next", { endpoint: state.reference }, parse, {
      retain: true,
      signal: options?.signal,
      onLate: () => {
        if (state.read === call) state.read = null;
      },
    });
    state.claimed = true;
    activate(state);
    state.read = call;
    let step;
    try {
      step = await call.promise;
    } catch (error) {
      if (call.detached) {
        // The read response and the disposal response are both retained and drained.
        startDisposal(state);
        throw error;
      }
      state.read = null;
      if (error instanceof OperationError && !LOCAL_CODES.has(error.code)) {
        // A failed read settles the receiver (Run/1 §5.1): the host holds
        // the sticky cause, so nothing more is sent for it unless the
        // receiver is then closed (one release).
        terminal(state, FAILED, error);
        state.exposed = true;
      }
      throw error;
    }
    state.read = null;
    if (step.done) {
      terminal(state, ENDED);
      return step;
    }
    state.next++;
    return step;
  }

  /** Early loop exit disposes the receiver. */
  async return() {
    await this.close();
    return { done: true, value: undefined };
  }

  /**
   * Dispose, joining a disposal already started; rejects with a cause no earlier operation exposed.
   * A receiver that ended sends nothing; one whose read failed sends one release and takes the
   * host's failed answer as its disposition.
   */
  async close(options) {
    const state = endpoints.get(this);
    if (state.disposal === null && !startDisposal(state)) {
      if (state.read !== null) await cancellable(state.read.wireDone, options?.signal);
      return;
    }
    await cancellable(state.disposal, options?.signal);
    if (state.cause !== null && !state.exposed) {
      state.exposed = true;
      throw state.cause;
    }
  }
}

/** Await `promise`, or reject CANCELLED when `signal` aborts first (the awaited work goes on). */
function cancellable(promise, signal) {
  if (!signal) return promise;
  if (signal.aborted) return Promise.reject(new OperationError("CANCELLED", "the wait was cancelled"));
  return new Promise((resolve, reject) => {
    const onAbort = () => reject(new OperationError("CANCELLED", "the wait was cancelled"));
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener("abort", onAbort);
        resolve(value);
      },
      (error) => {
        signal.removeEventListener("abort", onAbort);
        reject(error);
      },
    );
  });
}

/** An activated receiver is owned work until end, failure or disposal. */
function activate(state) {
  if (!state.active && state.state === OPEN) {
    state.active = true;
    state.session.receivers.add(state);
    state.session.channelDebt++;
  }
}

function deactivate(state) {
  if (state.active) {
    state.active = false;
    state.session.receivers.delete(state);
    state.session.channelDebt--;
  }
}

function terminal(state, to, cause = null) {
  if (state.state !== OPEN) return;
  state.state = to;
  if (cause !== null) state.cause = cause;
  deactivate(state);
}

/**
 * Start the one retained release action; false when nothing needs it. A receiver whose read
 * failed is settled, but closing it still sends its one release: the host answers with the
 * failure it recorded, and the receiver stays failed (later reads reject with the same cause).
 */
function startDisposal(state) {
  if (state.disposal !== null || state.state === ENDED || state.state === DISPOSED) {
    return false;
  }
  const failed = state.state === FAILED;
  if (!failed) state.state = DISPOSING;
  let call;
  try {
    call = state.session.admit("channel/release", { endpoint: state.reference }, parseRelease, {
      retain: true,
      internal: true,
    });
  } catch {
    if (!failed) state.state = DISPOSED;
    deactivate(state);
    return false;
  }
  state.disposal = (async () => {
    try {
      const outcome = await call.promise;
      // "released" means disposal won: deliberate incomplete delivery, not a failure.
      if (outcome.status === "failed" && state.cause === null) {
        state.cause = new OperationError(outcome.code, `channel receiver failed: ${outcome.code}`, outcome.details);
      }
    } catch (error) {
      if (error instanceof OperationError && !LOCAL_CODES.has(error.code) && state.cause === null) state.cause = error;
    }
    if (state.read !== null) await state.read.wireDone;
    if (state.state === DISPOSING) state.state = DISPOSED;
    deactivate(state);
  })();
  return true;
}

class ChannelPair {
  constructor(send, receive) {
    this.send = send;
    this.receive = receive;
    Object.freeze(this);
  }
}

/** A broadcast source: its writer plus subscription authority (creator only). */
class ChannelBroadcast {
  #session;
  #source;

  constructor(session, send, source) {
    this.#session = session;
    this.#source = source;
    this.send = send;
    Object.freeze(this);
  }

  /** Allocate a reader starting at the next accepted sequence. */
  subscribe(options) {
    const session = this.#session;
    return allocate(
      session,
      "channel/subscribe",
      { source: this.#source },
      (result) => ({ value: responseGrant(result, "receive", "broadcast", "subscription") }),
      (grant) => new ChannelReceiver(session, grant, true),
      options?.signal,
    );
  }
}

// Endpoint operations the application ignores must not crash the process when they fail.
for (
  const [type, names] of [
    [ChannelSender, ["send", "close"]],
    [ChannelReceiver, ["next", "return", "close"]],
    [ChannelBroadcast, ["subscribe"]],
  ]
) {
  for (const name of names) {
    const operation = type.prototype[name];
    Object.defineProperty(type.prototype, name, {
      value: function (...args) {
        return guard(operation.apply(this, args));
      },
      writable: true,
      configurable: true,
    });
  }
}

/** Run one allocation; a cancelled wait keeps it and disposes late grants. */
async function allocate(session, method, params, parse, build, signal) {
  session.channelDebt++;
  let settled = false;
  const settle = () => {
    if (!settled) {
      settled = true;
      session.channelDebt--;
    }
  };
  const late = (outcome) => {
    settle();
    if (hasOwn(outcome, "error")) return;
    const allocated = build(outcome.value);
    const receiver = allocated instanceof ChannelPair ? allocated.receive : allocated;
    if (receiver instanceof ChannelReceiver) startDisposal(endpoints.get(receiver));
  };
  let call;
  try {
    call = session.admit(method, params, parse, { retain: true, reserved: true, onLate: late, signal });
  } catch (error) {
    settle();
    throw error;
  }
  let value;
  try {
    value = await call.promise;
  } catch (error) {
    if (!call.detached) settle();
    throw error;
  }
  settle();
  return build(value);
}

async function createChannel(session, options = {}, callOptions) {
  if (options === null || typeof options !== "object") throw new TypeError("channel options must be an object");
  for (const name of Object.keys(options)) {
    if (!["delivery", "schema", "contract"].includes(name)) throw new TypeError(`unknown channel option ${name}`);
  }
  const delivery = options.delivery ?? "direct";
  if (delivery !== "direct" && delivery !== "broadcast") {
    throw new TypeError("delivery must be 'direct' or 'broadcast'");
  }
  const params = {};
  if (delivery === "broadcast") params.delivery = "broadcast";
  const hasSchema = options.schema !== undefined;
  if (hasSchema && options.contract !== undefined) throw new TypeError("schema and contract are mutually exclusive");
  if (hasSchema) {
    const schema = requireJson(options.schema, "schema");
    if (typeof schema !== "boolean" && !isObject(schema)) throw new TypeError("schema must be an object or a boolean");
    params.schema = schema;
  }
  if (options.contract !== undefined) {
    const contract = options.contract;
    if (
      typeof contract !== "string" || contract.length > MAX_CONTRACT_REFERENCE_CHARS ||
      !CONTRACT_REFERENCE.test(contract)
    ) {
      throw new TypeError("contract must be a package-local './...' reference");
    }
    params.contract = contract;
  }
  const signal = callOptions?.signal;
  if (delivery === "direct") {
    return allocate(
      session,
      "channel/create",
      params,
      (result) => {
        if (!isObject(result) || !keysAre(result, ["send", "receive"])) {
          throw new InvalidResponse("direct channel result must be exactly {send, receive}");
        }
        const send = responseGrant(result.send, "send", "direct", "send");
        const receive = responseGrant(result.receive, "receive", "direct", "receive");
        if (send.endpoint === receive.endpoint) throw new InvalidResponse("channel endpoints must be distinct");
        return { value: { send, receive } };
      },
      (grants) =>
        new ChannelPair(new ChannelSender(session, grants.send), new ChannelReceiver(session, grants.receive, false)),
      signal,
    );
  }
  return allocate(
    session,
    "channel/create",
    params,
    (result) => {
      if (!isObject(result) || !keysAre(result, ["send", "source"])) {
        throw new InvalidResponse("broadcast channel result must be exactly {send, source}");
      }
      const send = responseGrant(result.send, "send", "broadcast", "send");
      if (!isWireId(result.source)) throw new InvalidResponse("broadcast source is not a request-ID token");
      return { value: { send, source: result.source } };
    },
    (result) => new ChannelBroadcast(session, new ChannelSender(session, result.send), result.source),
    signal,
  );
}

/** Map a call's `channels` argument to endpoint reference strings. */
function channelReferences(session, channels) {
  if (channels === undefined) return undefined;
  if (channels === null || typeof channels !== "object" || Array.isArray(channels)) {
    throw new TypeError("channels must map names to channel endpoints");
  }
  const names = Object.keys(channels);
  if (names.length === 0) return undefined;
  if (names.length > MAX_CHANNELS) throw new TypeError("a call maps at most 256 channels");
  const references = {};
  const seen = new Set();
  for (const name of names) {
    if (!isLocalName(name)) throw new TypeError(`channel name ${JSON.stringify(name)} is not a LocalName`);
    const state = endpoints.get(channels[name]);
    if (state === undefined) throw new TypeError(`channel ${name} must be a ChannelSender or ChannelReceiver`);
    if (state.session !== session) throw new TypeError(`channel ${name} belongs to another invocation`);
    if (state.claimed) throw new TypeError(`channel ${name} was already used locally and cannot transfer`);
    if (state.receiver !== null && state.state !== OPEN) throw new TypeError(`channel ${name} was disposed`);
    if (seen.has(state.reference)) throw new TypeError("one endpoint cannot be mapped to two channel names");
    seen.add(state.reference);
    references[name] = state.reference;
  }
  return references;
}

// --- RunContext ---------------------------------------------------------------------------------

function requireWireId(value, what) {
  if (!isWireId(value)) throw new TypeError(`${what} must be a 1-128 byte token matching [A-Za-z0-9][A-Za-z0-9._:/-]*`);
  return value;
}

function requireLocalName(value, what) {
  if (!isLocalName(value)) throw new TypeError(`${what} must be a LocalName ([a-z0-9]+(-[a-z0-9]+)*, 1-64 bytes)`);
  return value;
}

function requireJson(value, what) {
  try {
    return json1.snapshot(value, 3);
  } catch (error) {
    throw new TypeError(`${what} is not a JSON/1 value: ${error.message}`);
  }
}

function requireCall(call, required, optional, what) {
  if (call === null || typeof call !== "object") throw new TypeError(`${what} must be an object`);
  for (const name of Object.keys(call)) {
    if (!required.includes(name) && !optional.includes(name)) throw new TypeError(`${what} has unknown field ${name}`);
  }
  for (const name of required) {
    if (call[name] === undefined) throw new TypeError(`${what} needs ${name}`);
  }
}

function makeContext(session, params) {
  const attachments = {};
  for (const [name, grant] of Object.entries(params.attachments)) {
    attachments[name] = Object.freeze({ path: grant.path, access: grant.access });
  }
  const grants = params.channels ?? {};
  const held = {};
  for (const [name, grant] of Object.entries(grants)) {
    held[name] = grant.direction === "send"
      ? new ChannelSender(session, grant)
      : new ChannelReceiver(session, grant, false);
  }

  async function runChildFlow(call, options) {
    requireCall(call, ["operationId", "slot", "input"], ["intent", "channels"], "ChildFlowRequest");
    const request = {
      operationId: requireWireId(call.operationId, "operationId"),
      slot: requireLocalName(call.slot, "slot"),
    };
    if (call.intent !== undefined) {
      const intent = call.intent;
      if (typeof intent !== "string" || intent.length === 0 || Array.from(intent).length > MAX_INTENT_CHARS) {
        throw new TypeError("intent must be a string of 1-16,384 Unicode scalar values");
      }
      request.intent = requireJson(intent, "intent");
    }
    request.input = requireJson(call.input, "input");
    const mapped = channelReferences(session, call.channels);
    if (mapped !== undefined) request.channels = mapped;
    return session.call("flow/run-child", request, (result) => ({ value: parseRunResult(result) }), options?.signal);
  }

  async function callCapability(call, options) {
    requireCall(call, ["operationId", "slot", "method", "input"], ["channels"], "CapabilityCall");
    const request = {
      operationId: requireWireId(call.operationId, "operationId"),
      slot: requireLocalName(call.slot, "slot"),
      method: requireLocalName(call.method, "method"),
      input: requireJson(call.input, "input"),
    };
    const mapped = channelReferences(session, call.channels);
    if (mapped !== undefined) request.channels = mapped;
    return session.call("capability/call", request, parseCapabilityResult, options?.signal);
  }

  async function channel(options, callOptions) {
    return createChannel(session, options ?? {}, callOptions);
  }

  return Object.freeze({
    input: params.input,
    settings: params.settings,
    attachments: Object.freeze(attachments),
    channels: Object.freeze(held),
    scratch: params.scratch,
    deadlineUnixMs: params.deadlineUnixMs,
    signal: session.controller.signal,
    runChildFlow: (call, options) => guard(runChildFlow(call, options)),
    callCapability: (call, options) => guard(callCapability(call, options)),
    channel: (options, callOptions) => guard(channel(options, callOptions)),
  });
}

/** A call the application ignores must not crash the process when it fails. */
function guard(promise) {
  promise.catch(noop);
  return promise;
}

// --- stdio takeover -----------------------------------------------------------------------------

/**
 * Replace the global console and process.stdout.write with stderr-backed
 * ones (`Console` from `node:console`, loaded only on this path).
 */
function redirectApplicationOutput(Console) {
  const stderr = process.stderr;
  const replacement = new Console({ stdout: stderr, stderr });
  Object.defineProperty(globalThis, "console", {
    value: replacement,
    writable: true,
    configurable: true,
    enumerable: false,
  });
  process.stdout.write = (chunk, encoding, callback) => stderr.write(chunk, encoding, callback);
}

let handled = false;

/**
 * On Bun, the stdio takeover at the descriptor level: the protocol keeps a
 * second descriptor of stdout, and fd 1 is reopened on stderr, so whatever
 * the application writes to stdout (console.log, process.stdout, Bun.stdout)
 * reaches stderr. Bun's node-compatible `process.stdin`/`stdout`/`stderr`
 * streams and `node:console` cost a Run about 40 ms of CPU to set up (half a
 * contained Run's CPU quota), and this touches none of them. Returns the
 * protocol descriptor, or null (nothing changed) when the descriptors cannot
 * be arranged so, for the stream path to take over instead.
 */
function takeOverDescriptors() {
  let protocol = null;
  try {
    protocol = fs.openSync("/dev/fd/1", fs.constants.O_WRONLY);
    fs.closeSync(1);
  } catch {
    if (protocol !== null) fs.closeSync(protocol);
    return null;
  }
  let reopened = null;
  try {
    reopened = fs.openSync("/dev/fd/2", fs.constants.O_WRONLY);
  } catch {
    // fd 1 is closed: application output is lost, never mixed into the
    // protocol stream.
  }
  if (reopened !== null && reopened !== 1) fs.closeSync(reopened);
  return protocol;
}

/** Feed the session from Bun's native stdin stream. */
async function readBunStdin(session) {
  let reader;
  try {
    reader = globalThis.Bun.stdin.stream().getReader();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) {
        session.onEnd("eof");
        return;
      }
      session.onData(value);
    }
  } catch {
    session.onEnd("error");
  }
}

/**
 * Serve one Run/1 invocation with `handler`, then exit the process: 0 after
 * the root response is written, 1 after a fatal channel failure.
 */
export function handle(handler) {
  if (typeof handler !== "function") return Promise.reject(new TypeError("handle() needs an async handler function"));
  if (handled) return Promise.reject(new Error("handle() serves exactly one Run per process"));
  handled = true;
  const bunFd = typeof globalThis.Bun === "object" && globalThis.Bun !== null ? takeOverDescriptors() : null;
  if (bunFd !== null) {
    return new Promise((resolve) => {
      const session = new Session(handler, bunFd, (status) => {
        resolve();
        process.exit(status);
      });
      readBunStdin(session);
    });
  }
  return import("node:console").then(({ Console }) => serveStreams(handler, Console));
}

/** Serve through the runtime's stdio streams (Node, Deno, or Bun as a fallback). */
function serveStreams(handler, Console) {
  // Capture the transport first: protocol frames go to fd 1 through our own writes.
  const outFd = 1;
  const stdin = process.stdin;
  return new Promise((resolve) => {
    const exit = (status) => {
      resolve();
      try {
        stdin.pause();
      } catch {
        // Nothing more to read either way.
      }
      process.exit(status);
    };
    const session = new Session(handler, outFd, exit);
    redirectApplicationOutput(Console);
    stdin.on("data", (chunk) => session.onData(chunk instanceof Uint8Array ? chunk : new TextEncoder().encode(chunk)));
    stdin.on("end", () => session.onEnd("eof"));
    stdin.on("error", () => session.onEnd("error"));
  });
}
