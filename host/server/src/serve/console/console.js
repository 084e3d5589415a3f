// jig console: the live parts. Server-Sent Events update the Runs list and
// a Run's page; the submit form checks its JSON input against the target's
// input.schema.json before sending (the host checks it again). Every value
// is written with textContent, never as markup.
"use strict";

function liveList() {
  const body = document.getElementById("runs");
  if (!body) return;
  const rows = body.dataset.live;
  const source = new EventSource(location.pathname.replace(/\/runs$/, "/runs/live"));
  source.addEventListener("changed", async () => {
    const response = await fetch(rows, { credentials: "same-origin" });
    if (!response.ok) return;
    const text = await response.text();
    const doc = new DOMParser().parseFromString(
      "<table><tbody>" + text + "</tbody></table>", "text/html");
    body.replaceChildren(...doc.querySelector("tbody").childNodes);
  });
}

function setStatus(status) {
  const el = document.getElementById("status");
  if (!el) return;
  el.textContent = status;
  el.className = "status " + status;
}

function liveRun() {
  const list = document.getElementById("events");
  if (!list) return;
  const source = new EventSource(list.dataset.src);
  source.onmessage = (message) => {
    let event;
    try { event = JSON.parse(message.data); } catch (_) { return; }
    const item = document.createElement("li");
    const kind = document.createElement("strong");
    kind.textContent = String(event.type);
    item.append(kind, " ");
    const body = document.createElement("code");
    const shown = Object.assign({}, event);
    delete shown.type;
    body.textContent = JSON.stringify(shown);
    item.append(body);
    list.append(item);
    if (event.type === "status" && typeof event.status === "string") setStatus(event.status);
    if (event.type === "terminal" && event.result) {
      document.getElementById("terminal").textContent = JSON.stringify(event.result);
      setStatus(String(event.result.status));
      const outcome = event.result.outcome || event.result.code ||
        (event.result.error && event.result.error.code) || "";
      const cell = document.getElementById("outcome");
      if (cell) cell.textContent = String(outcome);
      const cancel = document.getElementById("cancel");
      if (cancel) cancel.hidden = true;
    }
  };
  source.addEventListener("end", () => source.close());
}

// Schema/1 (flow/src/schema), all of it: the same keywords, the same
// evaluation order, the same work meter with its budget, and the JSON/1
// limits an instance must keep, so the page accepts exactly what the
// host's validator accepts (a browser test compares the two over a
// corpus). A schema the page cannot compile is left to the host.
const Schema1 = (() => {
  const BUDGET = 1000000;
  const MAX_SCHEMA_DEPTH = 64;
  const MAX_SCHEMA_NODES = 4096;
  const JSON1 = { depth: 128, nodes: 262144, members: 65536, items: 65536,
    stringBytes: 8388608, nameBytes: 1024, documentBytes: 16777216 };
  const TYPES = ["null", "boolean", "object", "array", "number", "integer", "string"];
  const ANNOTATIONS = ["$comment", "title", "description", "examples"];
  const EXHAUSTED = { exhausted: true };
  const encoder = new TextEncoder();
  const bytes = (text) => encoder.encode(text).length;
  const has = (o, k) => Object.prototype.hasOwnProperty.call(o, k);
  const isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);
  const token = (t) => String(t).replace(/~/g, "~0").replace(/\//g, "~1");
  // RFC 8785 member order: UTF-16 code units, which is how JS compares.
  const sorted = (names) => names.slice().sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  const count = (n) => Number.isInteger(n) && n >= 0;

  function compile(root) {
    if (!isObject(root)) throw new Error("a schema file root must be an object");
    const nodes = [];
    const defs = new Map();
    const refs = [];
    const build = (schema, pointer, depth) => {
      if (depth > MAX_SCHEMA_DEPTH) throw new Error("schema too deep");
      if (nodes.length >= MAX_SCHEMA_NODES) throw new Error("too many schema nodes");
      const node = { id: nodes.length, pointer };
      nodes.push(node);
      if (typeof schema === "boolean") { node.bool = schema; return node; }
      if (!isObject(schema)) throw new Error("a schema must be an object or a boolean");
      const k = {};
      const child = (key, value) => build(value, pointer + "/" + token(key), depth + 1);
      for (const key of Object.keys(schema)) {
        const value = schema[key];
        if (ANNOTATIONS.includes(key)) continue;
        switch (key) {
          case "$ref": {
            const m = typeof value === "string" && /^#\/\$defs\/([A-Za-z][A-Za-z0-9]{0,63})$/.exec(value);
            if (!m) throw new Error("$ref must name #/$defs/<name>");
            refs.push([node, m[1]]);
            break;
          }
          case "type": {
            const names = Array.isArray(value) ? value : [value];
            if (names.length === 0 || names.some((t) => !TYPES.includes(t))) throw new Error("bad type");
            k.types = names;
            break;
          }
          case "enum": if (!Array.isArray(value)) throw new Error("bad enum"); k.enumeration = value; break;
          case "const": k.constant = value; break;
          case "allOf": case "anyOf": case "oneOf": case "prefixItems":
            if (!Array.isArray(value) || value.length === 0) throw new Error("bad " + key);
            k[key] = value.map((item, i) => build(item, pointer + "/" + key + "/" + i, depth + 1));
            break;
          case "not": case "if": case "then": case "else":
          case "additionalProperties": case "items": case "contains":
            k[key] = child(key, value);
            break;
          case "properties": case "dependentSchemas":
            if (!isObject(value)) throw new Error("bad " + key);
            k[key] = sorted(Object.keys(value)).map((name) =>
              [name, build(value[name], pointer + "/" + key + "/" + token(name), depth + 1)]);
            break;
          case "required":
            if (!Array.isArray(value) || value.some((n) => typeof n !== "string")) throw new Error("bad required");
            k.required = value;
            break;
          case "dependentRequired":
            if (!isObject(value)) throw new Error("bad dependentRequired");
            k.dependentRequired = sorted(Object.keys(value)).map((name) => [name, value[name]]);
            break;
          case "minProperties": case "maxProperties": case "minContains": case "maxContains":
          case "minItems": case "maxItems": case "minLength": case "maxLength":
            if (!count(value)) throw new Error("bad " + key);
            k[key] = value;
            break;
          case "minimum": case "exclusiveMinimum": case "maximum": case "exclusiveMaximum":
            if (typeof value !== "number") throw new Error("bad " + key);
            k[key] = value;
            break;
          case "$schema": case "$defs":
            if (pointer === "") break;
            throw new Error(key + " only at the root");
          default:
            throw new Error("keyword " + key + " is not part of Schema/1");
        }
      }
      node.k = k;
      return node;
    };
    const top = build(root, "", 1);
    if (has(root, "$defs")) {
      if (!isObject(root.$defs)) throw new Error("$defs must be an object");
      for (const name of Object.keys(root.$defs)) {
        defs.set(name, build(root.$defs[name], "/$defs/" + token(name), 2));
      }
    }
    for (const [node, name] of refs) {
      if (!defs.has(name)) throw new Error("$ref names a missing definition");
      node.k.reference = defs.get(name);
    }
    return top;
  }

  const typeMatches = (type, v) => {
    switch (type) {
      case "null": return v === null;
      case "boolean": return typeof v === "boolean";
      case "object": return isObject(v);
      case "array": return Array.isArray(v);
      case "number": return typeof v === "number";
      case "integer": return typeof v === "number" && Number.isInteger(v);
      default: return typeof v === "string";
    }
  };

  function equal(a, b) {
    if (Array.isArray(a) || Array.isArray(b)) {
      return Array.isArray(a) && Array.isArray(b) && a.length === b.length &&
        a.every((x, i) => equal(x, b[i]));
    }
    if (isObject(a) || isObject(b)) {
      if (!isObject(a) || !isObject(b)) return false;
      const keys = Object.keys(a);
      return keys.length === Object.keys(b).length &&
        keys.every((key) => has(b, key) && equal(a[key], b[key]));
    }
    return a === b;
  }

  // The JSON/1 domain and limits of an instance (flow::json::check).
  function json1(value) {
    let nodes = 0;
    const walk = (v, depth) => {
      if (depth > JSON1.depth) return "deeper than " + JSON1.depth;
      if (++nodes > JSON1.nodes) return "more than " + JSON1.nodes + " values";
      if (typeof v === "number") {
        if (!Number.isFinite(v)) return "a number that is not finite";
        if (Number.isInteger(v) && !Number.isSafeInteger(v)) return "an integer outside the safe range";
      } else if (typeof v === "string") {
        if (bytes(v) > JSON1.stringBytes) return "a string over " + JSON1.stringBytes + " bytes";
      } else if (Array.isArray(v)) {
        if (v.length > JSON1.items) return "an array over " + JSON1.items + " items";
        for (const item of v) { const e = walk(item, depth + 1); if (e) return e; }
      } else if (isObject(v)) {
        const keys = Object.keys(v);
        if (keys.length > JSON1.members) return "an object over " + JSON1.members + " members";
        for (const key of keys) {
          if (bytes(key) > JSON1.nameBytes) return "a member name over " + JSON1.nameBytes + " bytes";
          const e = walk(v[key], depth + 1); if (e) return e;
        }
      }
      return null;
    };
    const problem = walk(value, 1);
    if (problem) return problem;
    if (bytes(JSON.stringify(value)) > JSON1.documentBytes) return "over " + JSON1.documentBytes + " bytes";
    return null;
  }

  // Evaluate: every (schema node, instance location) pair once, charging
  // the meter as flow/src/schema/evaluate.rs does; the first failure in
  // keyword order, or EXHAUSTED thrown past the budget.
  function evaluate(root, instance) {
    let units = 0;
    const memo = new Map();
    const charge = (n) => { units += n; if (units > BUDGET) throw EXHAUSTED; };
    const visit = (node, v, at) => {
      const key = node.id + "\u0000" + at;
      if (memo.has(key)) return memo.get(key);
      charge(1);
      const out = node.k ? object(node, node.k, v, at)
        : node.bool ? null : { instancePointer: at, schemaPointer: node.pointer, keyword: null };
      memo.set(key, out);
      return out;
    };
    const object = (node, k, v, at) => {
      let first = null;
      const note = (failed, keyword) => {
        if (failed && !first) first = { instancePointer: at, schemaPointer: node.pointer + "/" + keyword, keyword };
      };
      const passOn = (outcome) => { if (!first && outcome) first = outcome; };
      // Charges and child evaluations (nothing short-circuits).
      const run = visit;
      const ok = (child, where) => !memo.get(child.id + "\u0000" + where);
      if (k.reference) { charge(1); run(k.reference, v, at); }
      if (k.types) charge(k.types.length);
      if (has(k, "constant")) charge(1);
      if (k.enumeration) charge(k.enumeration.length);
      for (const key of ["allOf", "anyOf", "oneOf"]) {
        if (k[key]) { charge(k[key].length); for (const b of k[key]) run(b, v, at); }
      }
      if (k.not) { charge(1); run(k.not, v, at); }
      if (k.if) { charge(1); run(k.if, v, at); }
      const members = isObject(v) ? v : null;
      const items = Array.isArray(v) ? v : null;
      const declared = new Set((k.properties || []).map(([name]) => name));
      if (members) {
        if (k.properties) {
          charge(k.properties.length);
          for (const [name, child] of k.properties) if (has(members, name)) run(child, members[name], at + "/" + token(name));
        }
        if (k.required) charge(k.required.length);
        if (k.additionalProperties) {
          const names = Object.keys(members);
          charge(names.length);
          for (const name of names) if (!declared.has(name)) run(k.additionalProperties, members[name], at + "/" + token(name));
        }
        charge(has(k, "minProperties") ? 1 : 0);
        charge(has(k, "maxProperties") ? 1 : 0);
        if (k.dependentRequired) {
          charge(k.dependentRequired.length);
          for (const [trigger, names] of k.dependentRequired) if (has(members, trigger)) charge(names.length);
        }
        if (k.dependentSchemas) {
          charge(k.dependentSchemas.length);
          for (const [trigger, child] of k.dependentSchemas) if (has(members, trigger)) run(child, v, at);
        }
      } else if (items) {
        if (k.prefixItems) {
          charge(k.prefixItems.length);
          k.prefixItems.forEach((child, i) => { if (i < items.length) run(child, items[i], at + "/" + i); });
        }
        if (k.items) {
          charge(1);
          for (let i = k.prefixItems ? k.prefixItems.length : 0; i < items.length; i++) run(k.items, items[i], at + "/" + i);
        }
        if (k.contains) {
          charge(items.length);
          items.forEach((item, i) => run(k.contains, item, at + "/" + i));
          charge(has(k, "minContains") ? 1 : 0);
          charge(has(k, "maxContains") ? 1 : 0);
        }
        charge(has(k, "minItems") ? 1 : 0);
        charge(has(k, "maxItems") ? 1 : 0);
      } else if (typeof v === "string") {
        if (has(k, "minLength") || has(k, "maxLength")) {
          charge([...v].length + (has(k, "minLength") ? 1 : 0) + (has(k, "maxLength") ? 1 : 0));
        }
      } else if (typeof v === "number") {
        for (const bound of ["minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"]) charge(has(k, bound) ? 1 : 0);
      }
      // The branch the condition picks, charged once it is known.
      let branch = null;
      if (k.if) {
        branch = ok(k.if, at) ? k.then : k.else;
        if (branch) { charge(1); run(branch, v, at); }
      }
      // The outcome: the first failure in keyword order.
      if (k.reference) passOn(memo.get(k.reference.id + "\u0000" + at));
      if (k.types) note(!k.types.some((t) => typeMatches(t, v)), "type");
      if (has(k, "constant")) note(!equal(k.constant, v), "const");
      if (k.enumeration) note(!k.enumeration.some((m) => equal(m, v)), "enum");
      for (const b of k.allOf || []) passOn(memo.get(b.id + "\u0000" + at));
      if (k.anyOf) note(!k.anyOf.some((b) => ok(b, at)), "anyOf");
      if (k.oneOf) note(k.oneOf.filter((b) => ok(b, at)).length !== 1, "oneOf");
      if (k.not) note(ok(k.not, at), "not");
      if (branch) passOn(memo.get(branch.id + "\u0000" + at));
      if (members) {
        for (const [name, child] of k.properties || []) {
          if (has(members, name)) passOn(memo.get(child.id + "\u0000" + at + "/" + token(name)));
        }
        if (k.required) note(k.required.some((n) => !has(members, n)), "required");
        if (k.additionalProperties) {
          for (const name of sorted(Object.keys(members))) {
            if (!declared.has(name)) passOn(memo.get(k.additionalProperties.id + "\u0000" + at + "/" + token(name)));
          }
        }
        const n = Object.keys(members).length;
        if (has(k, "minProperties")) note(n < k.minProperties, "minProperties");
        if (has(k, "maxProperties")) note(n > k.maxProperties, "maxProperties");
        if (k.dependentRequired) {
          note(k.dependentRequired.some(([trigger, names]) =>
            has(members, trigger) && names.some((name) => !has(members, name))), "dependentRequired");
        }
        for (const [trigger, child] of k.dependentSchemas || []) {
          if (has(members, trigger)) passOn(memo.get(child.id + "\u0000" + at));
        }
      } else if (items) {
        (k.prefixItems || []).forEach((child, i) => {
          if (i < items.length) passOn(memo.get(child.id + "\u0000" + at + "/" + i));
        });
        if (k.items) {
          for (let i = k.prefixItems ? k.prefixItems.length : 0; i < items.length; i++) {
            passOn(memo.get(k.items.id + "\u0000" + at + "/" + i));
          }
        }
        if (k.contains) {
          const matched = items.filter((_, i) => ok(k.contains, at + "/" + i)).length;
          const min = has(k, "minContains") ? k.minContains : 1;
          note(matched < min, has(k, "minContains") ? "minContains" : "contains");
          if (has(k, "maxContains")) note(matched > k.maxContains, "maxContains");
        }
        if (has(k, "minItems")) note(items.length < k.minItems, "minItems");
        if (has(k, "maxItems")) note(items.length > k.maxItems, "maxItems");
      } else if (typeof v === "string") {
        if (has(k, "minLength") || has(k, "maxLength")) {
          const length = [...v].length;
          if (has(k, "minLength")) note(length < k.minLength, "minLength");
          if (has(k, "maxLength")) note(length > k.maxLength, "maxLength");
        }
      } else if (typeof v === "number") {
        if (has(k, "minimum")) note(v < k.minimum, "minimum");
        if (has(k, "exclusiveMinimum")) note(v <= k.exclusiveMinimum, "exclusiveMinimum");
        if (has(k, "maximum")) note(v > k.maximum, "maximum");
        if (has(k, "exclusiveMaximum")) note(v >= k.exclusiveMaximum, "exclusiveMaximum");
      }
      return first;
    };
    try {
      return visit(root, instance, "");
    } catch (e) {
      if (e === EXHAUSTED) return { code: "SCHEMA_LIMIT_EXCEEDED", instancePointer: "", keyword: null };
      throw e;
    }
  }

  // null when `value` is accepted, else {code, instancePointer, keyword}.
  function validate(schema, value) {
    const problem = json1(value);
    if (problem) return { code: "INVALID_INPUT", instancePointer: "", keyword: null, json: problem };
    const found = evaluate(compile(schema), value);
    if (!found) return null;
    return Object.assign({ code: "INVALID_INPUT" }, found);
  }

  return { compile, validate };
})();
// For the browser test that holds this validator to the host's.
window.jigSchema1 = Schema1;

function describe(problem) {
  if (problem.json) return "the input is not JSON/1: " + problem.json;
  if (problem.code === "SCHEMA_LIMIT_EXCEEDED") return "checking it exceeds the Schema/1 work budget";
  const where = problem.instancePointer === "" ? "the top level" : problem.instancePointer;
  return "the input does not match input.schema.json at " + where +
    (problem.keyword ? " (" + problem.keyword + ")" : "");
}

function submitForm() {
  const form = document.getElementById("submit");
  if (!form) return;
  const error = document.getElementById("input-error");
  const refuse = (text) => { error.textContent = text; error.hidden = false; };
  form.addEventListener("submit", (e) => {
    error.hidden = true;
    let input;
    try { input = JSON.parse(form.elements.input.value); } catch (x) {
      e.preventDefault();
      refuse("The input is not JSON: " + x.message);
      return;
    }
    const option = form.elements.target.selectedOptions[0];
    const text = option && option.dataset.schema;
    if (!text) return;
    let schema;
    try { schema = JSON.parse(text); } catch (_) { return; }
    let problem;
    try { problem = Schema1.validate(schema, input); } catch (_) { return; }
    if (problem) {
      e.preventDefault();
      const text = describe(problem);
      refuse(text.charAt(0).toUpperCase() + text.slice(1));
    }
  });
}

liveList();
liveRun();
submitForm();
