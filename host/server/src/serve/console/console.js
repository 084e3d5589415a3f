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

// A subset of Schema/1, enough to catch the usual mistakes in the page:
// type, enum, const, required, properties, additionalProperties, items,
// minimum/maximum, minLength/maxLength, minItems/maxItems. Anything else
// is left to the host.
function typeOf(v) {
  if (v === null) return "null";
  if (Array.isArray(v)) return "array";
  if (typeof v === "number") return Number.isInteger(v) ? "integer" : "number";
  return typeof v;
}

function check(schema, value, at) {
  if (schema === true || schema === undefined) return null;
  if (schema === false) return at + ": no value is allowed here";
  if (typeof schema !== "object") return null;
  const t = typeOf(value);
  if (schema.type !== undefined) {
    const types = Array.isArray(schema.type) ? schema.type : [schema.type];
    const ok = types.some((want) => want === t || (want === "number" && t === "integer"));
    if (!ok) return at + ": expected " + types.join(" or ") + ", got " + t;
  }
  if (schema.const !== undefined && JSON.stringify(schema.const) !== JSON.stringify(value))
    return at + ": must be " + JSON.stringify(schema.const);
  if (Array.isArray(schema.enum) && !schema.enum.some((e) => JSON.stringify(e) === JSON.stringify(value)))
    return at + ": must be one of " + schema.enum.map((e) => JSON.stringify(e)).join(", ");
  if (t === "string") {
    const n = [...value].length;
    if (schema.minLength !== undefined && n < schema.minLength) return at + ": shorter than " + schema.minLength;
    if (schema.maxLength !== undefined && n > schema.maxLength) return at + ": longer than " + schema.maxLength;
  }
  if (t === "number" || t === "integer") {
    if (schema.minimum !== undefined && value < schema.minimum) return at + ": less than " + schema.minimum;
    if (schema.maximum !== undefined && value > schema.maximum) return at + ": more than " + schema.maximum;
  }
  if (t === "array") {
    if (schema.minItems !== undefined && value.length < schema.minItems) return at + ": fewer than " + schema.minItems + " items";
    if (schema.maxItems !== undefined && value.length > schema.maxItems) return at + ": more than " + schema.maxItems + " items";
    if (schema.items !== undefined) {
      for (let i = 0; i < value.length; i++) {
        const e = check(schema.items, value[i], at + "/" + i);
        if (e) return e;
      }
    }
  }
  if (t === "object") {
    for (const name of schema.required || []) {
      if (!Object.prototype.hasOwnProperty.call(value, name)) return at + ": missing " + JSON.stringify(name);
    }
    const props = schema.properties || {};
    for (const [name, v] of Object.entries(value)) {
      const path = at + "/" + name;
      if (Object.prototype.hasOwnProperty.call(props, name)) {
        const e = check(props[name], v, path);
        if (e) return e;
      } else if (schema.additionalProperties !== undefined) {
        const e = check(schema.additionalProperties, v, path);
        if (e) return e;
      }
    }
  }
  return null;
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
    const problem = check(schema, input, "");
    if (problem) {
      e.preventDefault();
      const where = problem.startsWith(":") ? "the top level" + problem : problem;
      refuse("The input does not match input.schema.json at " + where);
    }
  });
}

liveList();
liveRun();
submitForm();
