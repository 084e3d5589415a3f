// Example provider of https://example.org/contracts/kv 1.0.0 in JavaScript.
//
// The same contract and behaviour as the Rust `kv-provider`: `get {"key": k}`
// answers the string stored under `k` in the operator's settings
// `{"entries": {...}}`, or the declared application error `not-found`.
//
// Build (from this directory):
//   jco componentize provider.js --wit ../../wit --world-name capability-provider \
//     --disable all -o kv_js.wasm

// The descriptor is part of the component: a provider never reads files.
// The host derives its identity and digest from this text itself.
const CONTRACT = {
  $schema: "https://flow.jig.md/schemas/capability-contract-1.schema.json",
  flowCapabilityContract: 1,
  id: "https://example.org/contracts/kv",
  version: "1.0.0",
  methods: {
    get: {
      input: { $ref: "#/$defs/Key" },
      output: { type: "string" },
      errors: { "not-found": { $ref: "#/$defs/Key" } },
    },
  },
  $defs: {
    Key: {
      type: "object",
      properties: { key: { type: "string" } },
      required: ["key"],
      additionalProperties: false,
    },
  },
};

// A thrown value is the `call-error` of the WIT result.
function operational(code, message) {
  return { tag: "operational", val: { code, message, details: undefined } };
}

export const provider = {
  contracts() {
    return [JSON.stringify(CONTRACT)];
  },

  call(ctx, method, input, config) {
    if (method !== "get") {
      throw operational("UNAVAILABLE", `no method ${JSON.stringify(method)}`);
    }
    // The host has checked the input against the method's schema.
    const { key } = JSON.parse(input);
    const entries = JSON.parse(config.settings).entries ?? {};
    const value = entries[key];
    if (typeof value === "string") {
      return JSON.stringify(value);
    }
    throw {
      tag: "application",
      val: { name: "not-found", data: JSON.stringify({ key }) },
    };
  },
};
