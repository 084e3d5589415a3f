// FLOW JSON/1: a strict parser for inbound frames, validated snapshots of
// application values, and compact encoding. This room owns the value model
// only; callers decide which protocol error a failure becomes.

// Absolute JSON/1 maxima (inclusive), per "FLOW JSON/1 value model".
export const MAX_DOCUMENT_BYTES = 16_777_216;
export const MAX_DEPTH = 128;
export const MAX_NODES = 262_144;
export const MAX_OBJECT_MEMBERS = 65_536;
export const MAX_ARRAY_ITEMS = 65_536;
export const MAX_STRING_BYTES = 8_388_608;
export const MAX_MEMBER_NAME_BYTES = 1_024;
export const MAX_NUMBER_TOKEN_BYTES = 128;
export const MAX_SAFE_INTEGER = 9_007_199_254_740_991;

export class Json1Error extends Error {
  constructor(message) {
    super(message);
    this.name = "Json1Error";
  }
}

const NUMBER_TOKEN = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** UTF-8 byte length of a well-formed string (each surrogate half counts 2). */
export function utf8Length(text) {
  let bytes = text.length;
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i);
    if (unit >= 0x80) bytes += unit < 0x800 || (unit >= 0xd800 && unit <= 0xdfff) ? 1 : 2;
  }
  return bytes;
}

/** Normalise a binary64 value, rejecting what JSON/1 does not admit. */
export function checkNumber(value) {
  if (!Number.isFinite(value)) throw new Json1Error("number is not finite");
  if (Number.isInteger(value) && Math.abs(value) > MAX_SAFE_INTEGER) {
    throw new Json1Error("integral number outside the safe integer range");
  }
  // -0 equals and canonicalises as 0.
  return value === 0 ? 0 : value;
}

function checkString(text, limit, what) {
  if (LONE_SURROGATE.test(text)) throw new Json1Error(`${what} contains a lone surrogate`);
  if (text.length * 3 > limit && utf8Length(text) > limit) {
    throw new Json1Error(`${what} exceeds ${limit} UTF-8 bytes`);
  }
  return text;
}

function setMember(object, name, value) {
  if (name === "__proto__") {
    Object.defineProperty(object, name, { value, enumerable: true, writable: true, configurable: true });
  } else {
    object[name] = value;
  }
}

const hasOwn = (object, name) => Object.prototype.hasOwnProperty.call(object, name);

/**
 * Parse one complete JSON/1 document from already UTF-8-decoded text.
 * Rejects duplicate members, lone surrogates, out-of-domain numbers and every
 * absolute limit; objects are plain, with magic names as ordinary members.
 */
export function parse(text) {
  let at = 0;
  let nodes = 0;
  const end = text.length;

  const fail = (why) => {
    throw new Json1Error(`${why} at offset ${at}`);
  };
  const space = () => {
    while (at < end) {
      const c = text.charCodeAt(at);
      if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) at++;
      else break;
    }
  };
  const literal = (word, value) => {
    if (text.startsWith(word, at)) {
      at += word.length;
      return value;
    }
    return fail("invalid literal");
  };
  const hex4 = () => {
    if (at + 4 > end) fail("truncated \\u escape");
    const digits = text.slice(at, at + 4);
    if (!/^[0-9A-Fa-f]{4}$/.test(digits)) fail("invalid \\u escape");
    at += 4;
    return parseInt(digits, 16);
  };
  const string = (limit, what) => {
    at++; // opening quote
    let out = "";
    let run = at;
    for (;;) {
      if (at >= end) fail("unterminated string");
      const c = text.charCodeAt(at);
      if (c === 0x22) {
        out += text.slice(run, at);
        at++;
        break;
      }
      if (c < 0x20) fail("control character in string");
      if (c !== 0x5c) {
        at++;
        continue;
      }
      out += text.slice(run, at);
      at++;
      const e = text[at++];
      switch (e) {
        case '"':
          out += '"';
          break;
        case "\\":
          out += "\\";
          break;
        case "/":
          out += "/";
          break;
        case "b":
          out += "\b";
          break;
        case "f":
          out += "\f";
          break;
        case "n":
          out += "\n";
          break;
        case "r":
          out += "\r";
          break;
        case "t":
          out += "\t";
          break;
        case "u": {
          const unit = hex4();
          if (unit >= 0xdc00 && unit <= 0xdfff) fail("lone low surrogate escape");
          if (unit >= 0xd800 && unit <= 0xdbff) {
            if (text[at] !== "\\" || text[at + 1] !== "u") fail("lone high surrogate escape");
            at += 2;
            const low = hex4();
            if (low < 0xdc00 || low > 0xdfff) fail("lone high surrogate escape");
            out += String.fromCharCode(unit, low);
          } else {
            out += String.fromCharCode(unit);
          }
          break;
        }
        default:
          fail("invalid escape");
      }
      run = at;
    }
    if (out.length * 3 > limit && utf8Length(out) > limit) fail(`${what} exceeds ${limit} UTF-8 bytes`);
    return out;
  };
  const number = () => {
    NUMBER_TOKEN.lastIndex = at;
    if (!NUMBER_TOKEN.test(text)) fail("invalid number");
    const token = text.slice(at, NUMBER_TOKEN.lastIndex);
    if (token.length > MAX_NUMBER_TOKEN_BYTES) fail("number token exceeds 128 bytes");
    at = NUMBER_TOKEN.lastIndex;
    try {
      return checkNumber(Number(token));
    } catch (error) {
      return fail(error.message);
    }
  };
  const value = (depth) => {
    if (depth > MAX_DEPTH) fail("document exceeds depth 128");
    if (++nodes > MAX_NODES) fail("document exceeds 262,144 value nodes");
    space();
    const c = text.charCodeAt(at);
    if (c === 0x7b) {
      at++;
      const object = {};
      let members = 0;
      space();
      if (text.charCodeAt(at) === 0x7d) {
        at++;
        return object;
      }
      for (;;) {
        space();
        if (text.charCodeAt(at) !== 0x22) fail("expected member name");
        const name = string(MAX_MEMBER_NAME_BYTES, "member name");
        if (hasOwn(object, name)) fail("duplicate object member name");
        if (++members > MAX_OBJECT_MEMBERS) fail("object exceeds 65,536 members");
        space();
        if (text.charCodeAt(at) !== 0x3a) fail("expected ':'");
        at++;
        setMember(object, name, value(depth + 1));
        space();
        const next = text.charCodeAt(at++);
        if (next === 0x7d) return object;
        if (next !== 0x2c) fail("expected ',' or '}'");
      }
    }
    if (c === 0x5b) {
      at++;
      const array = [];
      space();
      if (text.charCodeAt(at) === 0x5d) {
        at++;
        return array;
      }
      for (;;) {
        if (array.length >= MAX_ARRAY_ITEMS) fail("array exceeds 65,536 items");
        array.push(value(depth + 1));
        space();
        const next = text.charCodeAt(at++);
        if (next === 0x5d) return array;
        if (next !== 0x2c) fail("expected ',' or ']'");
      }
    }
    if (c === 0x22) return string(MAX_STRING_BYTES, "string");
    if (c === 0x74) return literal("true", true);
    if (c === 0x66) return literal("false", false);
    if (c === 0x6e) return literal("null", null);
    if (c === 0x2d || (c >= 0x30 && c <= 0x39)) return number();
    return fail(at >= end ? "unexpected end of document" : "unexpected character");
  };

  if (text.charCodeAt(0) === 0xfeff) throw new Json1Error("byte order mark");
  const result = value(1);
  space();
  if (at !== end) fail("trailing characters after the document");
  return result;
}

/**
 * An isolated deep copy of an application value, checked as JSON/1.
 * `depth` is the depth the value occupies in its frame, so nested values are
 * held to the frame's absolute depth limit. Only plain objects and arrays,
 * strings, finite numbers, booleans and null are values.
 */
export function snapshot(value, depth = 1) {
  const budget = { nodes: 0 };
  return copy(value, depth, budget);
}

function copy(value, depth, budget) {
  if (++budget.nodes > MAX_NODES) throw new Json1Error("value exceeds 262,144 nodes");
  if (depth > MAX_DEPTH) throw new Json1Error("value exceeds depth 128");
  if (value === null || value === true || value === false) return value;
  switch (typeof value) {
    case "string":
      return checkString(value, MAX_STRING_BYTES, "string");
    case "number":
      return checkNumber(value);
    case "object":
      break;
    default:
      throw new Json1Error(`${typeof value} is not a JSON value`);
  }
  if (Array.isArray(value)) {
    if (value.length > MAX_ARRAY_ITEMS) throw new Json1Error("array exceeds 65,536 items");
    const items = new Array(value.length);
    for (let i = 0; i < value.length; i++) {
      if (!(i in value)) throw new Json1Error("sparse array is not a JSON value");
      items[i] = copy(value[i], depth + 1, budget);
    }
    return items;
  }
  const proto = Object.getPrototypeOf(value);
  if (proto !== Object.prototype && proto !== null) {
    throw new Json1Error(`${proto?.constructor?.name ?? "object"} instance is not a JSON value`);
  }
  const names = Object.keys(value);
  if (names.length > MAX_OBJECT_MEMBERS) throw new Json1Error("object exceeds 65,536 members");
  const object = {};
  for (const name of names) {
    checkString(name, MAX_MEMBER_NAME_BYTES, "member name");
    setMember(object, name, copy(value[name], depth + 1, budget));
  }
  return object;
}

/** Count the value nodes of an already valid tree. */
export function measure(root) {
  let nodes = 0;
  const stack = [root];
  while (stack.length) {
    const value = stack.pop();
    nodes++;
    if (value !== null && typeof value === "object") {
      for (const member of Array.isArray(value) ? value : Object.values(value)) stack.push(member);
    }
  }
  return nodes;
}

const encoder = new TextEncoder();

/** Compact UTF-8 encoding of an already validated value. */
export function encode(value) {
  return encoder.encode(JSON.stringify(value));
}

/**
 * ECMAScript Number.prototype.toString of a finite binary64: the number form
 * of RFC 8785 §3.2.2.3 (`-0` is `"0"`). Not a JSON/1 check: 1e21 formats.
 */
export function formatNumber(value) {
  if (typeof value !== "number" || !Number.isFinite(value)) throw new Json1Error("number is not finite");
  return String(value);
}

/**
 * RFC 8785 (JCS) text of a JSON/1 value, the input of FLOW's digests. The value
 * is checked as JSON/1 first: canonicalization never repairs an out-of-domain
 * number, a lone surrogate or an oversized value.
 */
export function canonicalize(value) {
  const parts = [];
  canonicalInto(snapshot(value), parts);
  return parts.join("");
}

function canonicalInto(value, out) {
  if (value === null || typeof value !== "object") {
    // JSON.stringify is RFC 8785's serializer for scalars: its string escapes
    // (`"`, `\`, \b \t \n \f \r, other controls as lowercase \u00xx) and
    // its number form (Number.prototype.toString, -0 as 0) are the RFC's.
    out.push(typeof value === "number" ? formatNumber(value) : JSON.stringify(value));
  } else if (Array.isArray(value)) {
    out.push("[");
    value.forEach((item, index) => {
      if (index) out.push(",");
      canonicalInto(item, out);
    });
    out.push("]");
  } else {
    out.push("{");
    // The default sort compares UTF-16 code units, RFC 8785 §3.2.3's order.
    Object.keys(value)
      .sort()
      .forEach((name, index) => {
        if (index) out.push(",");
        out.push(JSON.stringify(name), ":");
        canonicalInto(value[name], out);
      });
    out.push("}");
  }
}
