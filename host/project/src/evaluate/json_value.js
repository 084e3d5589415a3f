// JSON/1 value inspection for author declarations.
//
// This file is one function expression. It is instantiated twice: by the
// snapshot prelude before any author code runs (so later tampering with
// globals cannot change it), and inside the `@jigging/jig` module for the
// helpers' own copies. Every intrinsic is captured when it is instantiated,
// and output is built with defineProperty so prototype setters never run.
(function jsonValue() {
  "use strict";
  const getPrototypeOf = Object.getPrototypeOf;
  const ownKeys = Reflect.ownKeys;
  const hasOwn = Object.hasOwn;
  const getOwnPropertyDescriptor = Object.getOwnPropertyDescriptor;
  const defineProperty = Object.defineProperty;
  const create = Object.create;
  const freeze = Object.freeze;
  const isArray = Array.isArray;
  const isSafeInteger = Number.isSafeInteger;
  const isFinite = Number.isFinite;
  const floor = Math.floor;
  const stringify = JSON.stringify;
  const ObjectPrototype = Object.prototype;
  const ArrayPrototype = Array.prototype;
  const TypeErrorCtor = TypeError;
  const apply = Reflect.apply;
  const regexpTest = RegExp.prototype.test;
  const ASCII = /^[\x00-\x7f]*$/;
  const SURROGATE = /[\ud800-\udfff]/;
  const matches = (re, s) => apply(regexpTest, re, [s]);
  const StringCtor = String;

  const MAX_DEPTH = 128;
  const MAX_NODES = 262144;
  const MAX_MEMBERS = 65536;
  const MAX_ITEMS = 65536;
  const MAX_STRING_BYTES = 8388608;
  const MAX_NAME_BYTES = 1024;

  function declarationError(message, pointer) {
    const error = new TypeErrorCtor(message);
    defineProperty(error, "jigDeclaration", { value: true });
    if (pointer !== undefined) defineProperty(error, "pointer", { value: pointer });
    return error;
  }

  // UTF-8 length of a well-formed string; -1 when it holds a lone surrogate.
  function utf8Length(s) {
    if (matches(ASCII, s)) return s.length;
    let n = 0;
    for (let i = 0; i < s.length; i++) {
      const c = s.charCodeAt(i);
      if (c < 0x80) n += 1;
      else if (c < 0x800) n += 2;
      else if (c >= 0xd800 && c <= 0xdbff) {
        const d = s.charCodeAt(i + 1);
        if (!(d >= 0xdc00 && d <= 0xdfff)) return -1;
        n += 4;
        i++;
      } else if (c >= 0xdc00 && c <= 0xdfff) return -1;
      else n += 3;
    }
    return n;
  }

  // Orders strings by Unicode code point, which is UTF-8 byte order.
  function compareCodePoints(a, b) {
    const n = a.length < b.length ? a.length : b.length;
    for (let i = 0; i < n; i++) {
      const x = a.codePointAt(i);
      const y = b.codePointAt(i);
      if (x !== y) return x < y ? -1 : 1;
      if (x > 0xffff) i++;
    }
    return a.length === b.length ? 0 : a.length < b.length ? -1 : 1;
  }

  // A stable bottom-up merge sort that relies on no Array.prototype method
  // and writes only to null-prototype scratch objects.
  function sortStrings(list) {
    const n = list.length;
    let from = create(null);
    let to = create(null);
    // UTF-16 order (the native `<`) is code point order unless a surrogate is involved.
    let native = true;
    for (let i = 0; i < n; i++) {
      from[i] = list[i];
      if (native && matches(SURROGATE, list[i])) native = false;
    }
    const order = native ? (a, b) => (a < b ? -1 : a > b ? 1 : 0) : compareCodePoints;
    for (let width = 1; width < n; width *= 2) {
      for (let lo = 0; lo < n; lo += 2 * width) {
        const mid = lo + width < n ? lo + width : n;
        const hi = lo + 2 * width < n ? lo + 2 * width : n;
        let i = lo;
        let j = mid;
        let k = lo;
        while (i < mid && j < hi) to[k++] = order(from[i], from[j]) <= 0 ? from[i++] : from[j++];
        while (i < mid) to[k++] = from[i++];
        while (j < hi) to[k++] = from[j++];
      }
      const swap = from;
      from = to;
      to = swap;
    }
    const out = [];
    for (let i = 0; i < n; i++) {
      defineProperty(out, i, { value: from[i], writable: true, enumerable: true, configurable: true });
    }
    return out;
  }

  function escapePointer(key) {
    let out = "";
    for (let i = 0; i < key.length; i++) {
      const c = key[i];
      out += c === "~" ? "~0" : c === "/" ? "~1" : c;
    }
    return out;
  }

  // Validates `value` as a bounded JSON/1 value and returns a plain copy with
  // object keys sorted; `frozen` deep-freezes the copy. `label` names the
  // value in the error message.
  function copy(value, label, frozen) {
    let nodes = 0;
    const active = create(null);
    let depth = 0;
    const fail = (pointer) => {
      throw declarationError(label + " contains a non-JSON value", pointer);
    };
    const failLimit = (pointer, what) => {
      throw declarationError(label + " exceeds the JSON/1 " + what + " limit", pointer);
    };
    function visit(v, pointer) {
      nodes++;
      if (nodes > MAX_NODES) failLimit(pointer, "node");
      if (v === null || typeof v === "boolean") return v;
      if (typeof v === "string") {
        const bytes = utf8Length(v);
        if (bytes < 0) fail(pointer);
        if (bytes > MAX_STRING_BYTES) failLimit(pointer, "string");
        return v;
      }
      if (typeof v === "number") {
        if (!isFinite(v)) fail(pointer);
        if (floor(v) === v && !isSafeInteger(v)) fail(pointer);
        return v === 0 ? 0 : v;
      }
      if (typeof v !== "object") fail(pointer);
      for (let i = 0; i < depth; i++) if (active[i] === v) fail(pointer);
      if (depth + 1 >= MAX_DEPTH) failLimit(pointer, "depth");
      active[depth] = v;
      depth++;
      let out;
      const proto = getPrototypeOf(v);
      const keys = ownKeys(v);
      if (isArray(v)) {
        if (proto !== ArrayPrototype) fail(pointer);
        const length = v.length;
        if (length > MAX_ITEMS) failLimit(pointer, "array item");
        if (keys.length !== length + 1) fail(pointer);
        out = [];
        for (let i = 0; i < length; i++) {
          const d = getOwnPropertyDescriptor(v, StringCtor(i));
          if (d === undefined || !hasOwn(d, "value")) fail(pointer + "/" + i);
          defineProperty(out, i, {
            value: visit(d.value, pointer + "/" + i),
            writable: !frozen,
            enumerable: true,
            configurable: !frozen,
          });
        }
      } else {
        if (proto !== ObjectPrototype && proto !== null) fail(pointer);
        if (keys.length > MAX_MEMBERS) failLimit(pointer, "object member");
        for (let i = 0; i < keys.length; i++) if (typeof keys[i] !== "string") fail(pointer);
        const sorted = sortStrings(keys);
        out = {};
        for (let i = 0; i < sorted.length; i++) {
          const key = sorted[i];
          const child = pointer + "/" + escapePointer(key);
          const nameBytes = utf8Length(key);
          if (nameBytes < 0) fail(child);
          if (nameBytes > MAX_NAME_BYTES) failLimit(child, "member name");
          const d = getOwnPropertyDescriptor(v, key);
          if (d === undefined || !hasOwn(d, "value") || !d.enumerable) fail(child);
          defineProperty(out, key, {
            value: visit(d.value, child),
            writable: !frozen,
            enumerable: true,
            configurable: !frozen,
          });
        }
      }
      depth--;
      active[depth] = undefined;
      return frozen ? freeze(out) : out;
    }
    return visit(value, "");
  }

  // Serializes a value produced by `copy` (trusted shape) as JSON text.
  function toJson(v) {
    if (v === null) return "null";
    if (typeof v === "boolean") return v ? "true" : "false";
    if (typeof v === "number") return stringify(v);
    if (typeof v === "string") return stringify(v);
    let out;
    if (isArray(v)) {
      out = "[";
      for (let i = 0; i < v.length; i++) out += (i ? "," : "") + toJson(v[i]);
      return out + "]";
    }
    const keys = ownKeys(v);
    out = "{";
    for (let i = 0; i < keys.length; i++) {
      out += (i ? "," : "") + stringify(keys[i]) + ":" + toJson(v[keys[i]]);
    }
    return out + "}";
  }

  return freeze({ copy, toJson, declarationError, utf8Length, compareCodePoints, sortStrings });
})
