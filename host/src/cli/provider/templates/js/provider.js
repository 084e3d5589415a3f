// The @NAME@ capability provider (contract @NAME@.capability.json).

// `CONTRACT` (the descriptor) is prepended by the build (see README.md),
// so it is part of the component.

function greet(input) {
  if (input.name === "") {
    throw { tag: "application", val: { name: "nameless", data: "{}" } };
  }
  return `Hello, ${input.name}!`;
}

const METHODS = { greet };

export const provider = {
  contracts() {
    return [JSON.stringify(CONTRACT)];
  },

  call(ctx, method, input, config) {
    const handler = METHODS[method];
    if (handler === undefined) {
      const message = `no method ${JSON.stringify(method)}`;
      throw { tag: "operational", val: { code: "UNAVAILABLE", message, details: undefined } };
    }
    // The host has checked the input against the method's schema.
    return JSON.stringify(handler(JSON.parse(input)));
  },
};
