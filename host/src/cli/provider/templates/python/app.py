"""The @NAME@ capability provider (contract @NAME@.capability.json)."""

import json

from componentize_py_types import Err
from wit_world import exports
from wit_world.exports import provider as wit

# Written from @NAME@.capability.json by the build (see README.md), so the
# descriptor is part of the component.
from contract import CONTRACT


def greet(input: dict) -> str:
    if not input["name"]:
        error = wit.ApplicationError("nameless", "{}")
        raise Err(wit.CallError_Application(error))
    return f"Hello, {input['name']}!"


METHODS = {"greet": greet}


class Provider(exports.Provider):
    def contracts(self) -> list[str]:
        return [CONTRACT]

    def call(self, ctx, method, input, config) -> str:
        handler = METHODS.get(method)
        if handler is None:
            message = f"no method {method!r}"
            raise Err(wit.CallError_Operational(wit.OperationalError("UNAVAILABLE", message, None)))
        # The host has checked the input against the method's schema.
        return json.dumps(handler(json.loads(input)))
