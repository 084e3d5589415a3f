"""Example provider of https://example.org/contracts/kv 1.0.0 in Python.

The same contract and behaviour as the Rust `kv-provider`: `get {"key": k}`
answers the string stored under `k` in the operator's settings
`{"entries": {...}}`, or the declared application error `not-found`.

Build (from this directory):
    componentize-py -d ../../wit -w capability-provider componentize app -o kv_python.wasm
"""

import json

from componentize_py_types import Err
from wit_world import exports
from wit_world.exports import provider as wit

# The descriptor is part of the component: a provider never reads files.
# The host derives its identity and digest from this text itself.
CONTRACT = {
    "$schema": "https://flow.jig.md/schemas/capability-contract-1.schema.json",
    "flowCapabilityContract": 1,
    "id": "https://example.org/contracts/kv",
    "version": "1.0.0",
    "methods": {
        "get": {
            "input": {"$ref": "#/$defs/Key"},
            "output": {"type": "string"},
            "errors": {"not-found": {"$ref": "#/$defs/Key"}},
        }
    },
    "$defs": {
        "Key": {
            "type": "object",
            "properties": {"key": {"type": "string"}},
            "required": ["key"],
            "additionalProperties": False,
        }
    },
}


def operational(code: str, message: str) -> Err:
    return Err(wit.CallError_Operational(wit.OperationalError(code, message, None)))


class Provider(exports.Provider):
    def contracts(self) -> list[str]:
        return [json.dumps(CONTRACT)]

    def call(self, ctx, method, input, config) -> str:
        if method != "get":
            raise operational("UNAVAILABLE", f"no method {method!r}")
        # The host has checked the input against the method's schema.
        key = json.loads(input)["key"]
        entries = json.loads(config.settings).get("entries", {})
        value = entries.get(key)
        if isinstance(value, str):
            return json.dumps(value)
        error = wit.ApplicationError("not-found", json.dumps({"key": key}))
        raise Err(wit.CallError_Application(error))
