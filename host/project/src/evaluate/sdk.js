// The built-in `@jigging/jig` authoring module (docs/src/projects.md): three
// synchronous, side-effect-free helpers returning deeply frozen plain data
// with sorted keys. They exist for ergonomics and early, readable errors;
// Jig re-validates and re-normalizes whatever the default export holds.
//
// The evaluator prepends `const jsonValue = (<json_value.js>)();`.

const { copy, declarationError, utf8Length, sortStrings } = jsonValue;
const freeze = Object.freeze;
const isArray = Array.isArray;
const getPrototypeOf = Object.getPrototypeOf;
const ownKeys = Reflect.ownKeys;
const getOwnPropertyDescriptor = Object.getOwnPropertyDescriptor;
const hasOwn = Object.hasOwn;
const ObjectPrototype = Object.prototype;
const ArrayPrototype = Array.prototype;
const apply = Reflect.apply;
const WeakSetCtor = WeakSet;
const weakAdd = WeakSet.prototype.add;
const weakHas = WeakSet.prototype.has;

// Values this module's discover() returned: already normalized, so
// defineJig() need not normalize them again. Anything else is re-checked.
const discovered = new WeakSetCtor();

const MAX_CONTAINER = 65536;
const MAX_PATH_BYTES = 1024;
const MAX_SEGMENTS = 64;
const MAX_SEGMENT_BYTES = 255;
const MAX_SLOTS = 256;
const MAX_COMMANDS = 8;
const MAX_COMMAND_PATH = 256;
const MAX_COMMAND_SEGMENTS = 16;
const MAX_TESTS = 16;
const GLOB = /[*?[\]{}]/;
const LOCAL_NAME = /^[a-z0-9]+(?:-[a-z0-9]+)*$/;
const COMMAND_PATH = /^[A-Za-z0-9_][A-Za-z0-9_./-]*$/;
const TEST_PATH = /\.(test|spec)\.(ts|js)$/;

function fail(message) {
  throw declarationError(message);
}

function isPlainObject(v) {
  if (v === null || typeof v !== "object" || isArray(v)) return false;
  const proto = getPrototypeOf(v);
  return proto === ObjectPrototype || proto === null;
}

function isPlainArray(v) {
  return isArray(v) && getPrototypeOf(v) === ArrayPrototype;
}

// Reads own data property `key`; accessors are refused rather than run.
function field(object, key, what) {
  const d = getOwnPropertyDescriptor(object, key);
  if (d === undefined) return { present: false, value: undefined };
  if (!hasOwn(d, "value")) fail(what + " must be a plain data property");
  return { present: true, value: d.value };
}

function stringList(value, message) {
  if (!isPlainArray(value)) fail(message);
  const keys = ownKeys(value);
  if (keys.length !== value.length + 1) fail(message);
  const out = [];
  for (let i = 0; i < value.length; i++) {
    const item = field(value, String(i), message);
    if (!item.present || typeof item.value !== "string") fail(message);
    out.push(item.value);
  }
  return out;
}

function isLocalName(name) {
  return typeof name === "string" && name.length <= 64 && LOCAL_NAME.test(name);
}

// An approximation of Unicode full case folding, good enough for the helper's
// early collision errors; Jig's own check uses the exact Unicode 15.1 table.
function fold(path) {
  return path.toUpperCase().toLowerCase().normalize("NFC");
}

function projectPath(value, what) {
  if (typeof value !== "string") fail(what + " must be a string");
  const path = value.startsWith("./") ? value.slice(2) : value;
  if (path === "") fail(what + " must not be empty");
  if (path.startsWith("/")) fail(what + " must be relative to the project");
  if (path.includes("\\")) fail(what + " cannot contain a backslash");
  if (path.includes("\0")) fail(what + " cannot contain NUL");
  const bytes = utf8Length(path);
  if (bytes < 0) fail(what + " must contain Unicode scalar values only");
  if (bytes > MAX_PATH_BYTES) fail(what + " exceeds 1024 UTF-8 bytes");
  if (path.normalize("NFC") !== path) fail(what + " must be Unicode NFC");
  const segments = path.split("/");
  if (segments.length > MAX_SEGMENTS) fail(what + " exceeds 64 segments");
  for (const segment of segments) {
    if (segment === "" || segment === "." || segment === "..") {
      fail(what + " cannot contain empty, \".\", or \"..\" segments");
    }
    if (utf8Length(segment) > MAX_SEGMENT_BYTES) fail(what + " has a segment over 255 UTF-8 bytes");
  }
  if (fold(segments[0]) === ".jig") fail(what + " cannot select protected .jig state");
  return path;
}

// Sorts canonical paths and rejects duplicates and case-fold collisions.
function sortedUnique(paths, collide) {
  const sorted = sortStrings(paths);
  const seen = new Map();
  for (const path of sorted) {
    const key = fold(path);
    if (seen.has(key)) fail(collide(seen.get(key), path));
    seen.set(key, path);
  }
  return freeze(sorted);
}

export function discover(roots) {
  let list;
  if (typeof roots === "string") list = [roots];
  else list = stringList(roots, "roots must be an array of strings");
  if (list.length === 0) fail("discover() requires at least one root");
  if (list.length > MAX_CONTAINER) fail("root values exceed the JSON/1 container bound");
  const normalized = [];
  for (const root of list) {
    if (GLOB.test(root)) fail("root cannot contain glob characters");
    normalized.push(projectPath(root, "discovery root"));
  }
  const sorted = sortedUnique(normalized, (a, b) => "root paths collide: " + a + " and " + b);
  const out = freeze({ kind: "discover", roots: sorted });
  apply(weakAdd, discovered, [out]);
  return out;
}

function source(name, value) {
  if (isArray(value)) {
    const list = stringList(value, name + " members must be an array of strings");
    if (list.length > MAX_CONTAINER) fail(name + " members exceed the JSON/1 container bound");
    const paths = list.map((p) => projectPath(p, name + " member"));
    const sorted = sortedUnique(paths, (a, b) => name + " members collide: " + a + " and " + b);
    return freeze({ kind: "members", paths: sorted });
  }
  if (!isPlainObject(value)) fail(name + " source must come from discover()");
  if (apply(weakHas, discovered, [value])) return value;
  const kind = field(value, "kind", name + " source kind");
  if (kind.value === "members") fail(name + " source must come from discover()");
  if (kind.value !== "discover") fail(name + " source has an invalid kind");
  for (const key of ownKeys(value)) {
    if (key !== "kind" && key !== "roots") fail(name + " source has an invalid kind");
  }
  const roots = field(value, "roots", name + " roots");
  if (!isPlainArray(roots.value) || roots.value.length === 0) {
    fail(name + " discovery requires at least one root");
  }
  return discover(roots.value);
}

export function defineJig(definition) {
  if (!isPlainObject(definition)) fail("Jig definition must be an object");
  for (const key of ownKeys(definition)) {
    if (key !== "flows" && key !== "bindings") fail("Jig definition has unknown field " + String(key));
  }
  const out = {};
  for (const name of ["bindings", "flows"]) {
    const f = field(definition, name, name);
    if (!f.present) continue;
    // An explicit `undefined` is kept so the snapshot reports it as non-JSON.
    out[name] = f.value === undefined ? undefined : source(name, f.value);
  }
  return freeze(out);
}

function targetSelector(slot, value) {
  if (typeof value !== "string") fail("slot " + slot + " must be a target selector");
  const invalid = "slot " + slot + " must select flow:<path> or binding:<id>";
  if (value.startsWith("flow:")) {
    let path;
    try {
      path = projectPath(value.slice(5), "slot " + slot + " path");
    } catch {
      fail(invalid);
    }
    return "flow:" + path;
  }
  if (value.startsWith("binding:")) {
    const id = value.slice(8);
    if (!isLocalName(id)) fail(invalid);
    return "binding:" + id;
  }
  fail(invalid);
}

function commandPath(value) {
  if (typeof value !== "string" || value.length === 0 || value.length > MAX_COMMAND_PATH) return false;
  if (!COMMAND_PATH.test(value)) return false;
  const segments = value.split("/");
  if (segments.length > MAX_COMMAND_SEGMENTS) return false;
  return segments.every((s) => s !== "" && s !== "." && s !== "..");
}

const COMMAND_OPTIONS = ["timeout", "tail", "env", "pin"];

// Seed 003's options are copied as plain data and checked by Jig, which
// owns their refusal texts; only unknown fields (`slot` among them) are
// refused here already.
function commandEntry(name, value) {
  const prefix = "command " + name;
  if (!isPlainObject(value)) fail(prefix + " must have exactly one of run or test");
  const keys = ownKeys(value);
  for (const key of keys) {
    if (key !== "run" && key !== "test" && !COMMAND_OPTIONS.includes(key)) {
      fail(prefix + " has unknown field " + String(key));
    }
  }
  const actions = keys.filter((k) => k === "run" || k === "test");
  if (actions.length !== 1) fail(prefix + " must have exactly one of run or test");
  const out = {};
  for (const option of COMMAND_OPTIONS) {
    const o = field(value, option, prefix + " " + option);
    if (o.present) out[option] = copy(o.value, prefix + " " + option, true);
  }
  const f = field(value, actions[0], prefix);
  if (actions[0] === "run") {
    if (!commandPath(f.value) || !(f.value.endsWith(".ts") || f.value.endsWith(".js"))) {
      fail(prefix + " run must be a relative .ts or .js path");
    }
    out.run = f.value;
    return freezeSorted(out);
  }
  const tests = stringList(f.value, prefix + " test must be an array of paths");
  if (tests.length === 0 || tests.length > MAX_TESTS) fail(prefix + " test must list 1 to 16 paths");
  for (const t of tests) {
    if (!commandPath(t) || !TEST_PATH.test(t)) fail(prefix + " test paths must be relative *.test.ts, *.test.js, *.spec.ts or *.spec.js files");
  }
  const sorted = sortStrings(tests);
  for (let i = 1; i < sorted.length; i++) {
    if (sorted[i] === sorted[i - 1]) fail(prefix + " test paths must be distinct");
  }
  out.test = freeze(tests.slice());
  return freezeSorted(out);
}

function freezeSorted(object) {
  const out = {};
  for (const key of sortStrings(ownKeys(object))) out[key] = object[key];
  return freeze(out);
}

// An Effect secret for a command's env (seed 003): inert data naming the
// secret, which the operator maps to a file in the host configuration.
// `secret("x")` gives the command the value; `secret("x").path` the path
// of a file holding it. Projects never hold the value.
export function secret(name) {
  if (!isLocalName(name)) fail("secret name must be a LocalName");
  const path = freeze({ kind: "secretPath", name });
  return freeze({ kind: "secret", name, path });
}

export function defineBinding(definition) {
  if (!isPlainObject(definition)) fail("Binding definition must be an object");
  for (const key of ownKeys(definition)) {
    if (key !== "package" && key !== "settings" && key !== "slots" && key !== "commands") {
      fail("Binding definition has unknown field " + String(key));
    }
  }
  const pkg = field(definition, "package", "package");
  if (!pkg.present || pkg.value === undefined) fail("Binding package is required");
  const packagePath = projectPath(pkg.value, "Binding package");

  const settingsField = field(definition, "settings", "settings");
  let settings = freeze({});
  if (settingsField.present) {
    if (!isPlainObject(settingsField.value)) fail("settings must be an object");
    settings = copy(settingsField.value, "settings", true);
  }

  const slotsField = field(definition, "slots", "slots");
  const slots = {};
  if (slotsField.present) {
    if (!isPlainObject(slotsField.value)) fail("slots must be an object");
    const names = ownKeys(slotsField.value);
    if (names.length > MAX_SLOTS) fail("slots exceed 256 entries");
    for (const name of names) if (!isLocalName(name)) fail("slot name must be a LocalName");
    for (const name of sortStrings(names)) {
      slots[name] = targetSelector(name, field(slotsField.value, name, "slot " + name).value);
    }
  }

  const out = {};
  const commandsField = field(definition, "commands", "commands");
  if (commandsField.present) {
    if (!isPlainObject(commandsField.value)) fail("commands must be an object");
    const names = ownKeys(commandsField.value);
    if (names.length > MAX_COMMANDS) fail("commands exceed eight entries");
    for (const name of names) if (!isLocalName(name)) fail("command name must be a LocalName");
    const commands = {};
    for (const name of sortStrings(names)) {
      commands[name] = commandEntry(name, field(commandsField.value, name, "command " + name).value);
    }
    if (names.length > 0) out.commands = freeze(commands);
  }
  out.kind = "package";
  out.package = packagePath;
  out.settings = settings;
  out.slots = freeze(slots);
  return freeze(out);
}

