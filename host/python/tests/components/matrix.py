"""The Run/1 conformance "matrix component", on jiggy.flow.

`input.case` selects one behaviour; any other input returns done/null.
"""

import asyncio

from jiggy.flow import OperationError, RunContext, RunResult, handle

LIFETIME_REQUESTS = 65_536


async def fanout(context: RunContext):
    await asyncio.gather(
        *(
            context.call_capability(
                operation_id=f"fanout:{index + 1}",
                slot="sink",
                method="write",
                input={"index": index},
            )
            for index in range(65)
        )
    )
    return {"settled": 65}


async def operation_identity(context: RunContext):
    def shared(value):
        return context.call_capability(
            operation_id="shared:1", slot="sink", method="write", input={"value": value}
        )

    first, second = await asyncio.gather(shared("same"), shared("same"))
    replay = await shared("same")
    try:
        await shared("different")
    except OperationError as error:
        conflict = error.code
    else:
        raise RuntimeError("a changed shared:1 call did not conflict")
    return {"first": first, "second": second, "replay": replay, "conflict": conflict}


async def cancel_shared_waiter(context: RunContext):
    def waiter():
        return asyncio.create_task(
            context.call_capability(
                operation_id="shared-cancel:1",
                slot="sink",
                method="write",
                input={"value": "shared"},
            )
        )

    first, second = waiter(), waiter()
    # Both waiters reach the wire before the release call (SCENARIOS order).
    await asyncio.sleep(0)
    await context.call_capability(
        operation_id="release-shared-cancel:1", slot="control", method="release", input=None
    )
    first.cancel()
    try:
        await first
    except asyncio.CancelledError:
        cancellation = "CANCELLED"
    else:
        cancellation = "completed"
    return {"cancellation": cancellation, "survivor": await second}


async def uncertain_replay(context: RunContext):
    async def attempt(operation_id):
        try:
            return await context.call_capability(
                operation_id=operation_id,
                slot="sink",
                method="write",
                input={"value": "uncertain"},
            )
        except OperationError as error:
            return error.code

    first = await attempt("uncertain:1")
    replay = await attempt("uncertain:1")
    fresh = await attempt("uncertain:2")
    return {"first": first, "replay": replay, "fresh": fresh}


async def request_lifetime(context: RunContext):
    for index in range(1, LIFETIME_REQUESTS + 1):
        await context.call_capability(
            operation_id=f"lifetime:{index}", slot="sink", method="write", input=None
        )
    try:
        await context.call_capability(
            operation_id=f"lifetime:{LIFETIME_REQUESTS + 1}",
            slot="sink",
            method="write",
            input=None,
        )
    except OperationError as error:
        return {"accepted": LIFETIME_REQUESTS, "rejected": error.code}
    raise RuntimeError("the 65,537th request was not refused")


async def one_flow(context: RunContext):
    return await context.run_child_flow(operation_id="child:1", slot="child", input=None)


async def two_effects(context: RunContext):
    first = await context.call_capability(
        operation_id="first:1", slot="sink", method="write", input={"sequence": 1}
    )
    second = await context.call_capability(
        operation_id="second:1", slot="sink", method="write", input={"sequence": 2}
    )
    return {"first": first, "second": second}


async def cancel_one_call(context: RunContext):
    child = asyncio.create_task(
        context.run_child_flow(operation_id="cancelled-child:1", slot="child", input=None)
    )
    await asyncio.sleep(0)
    await context.call_capability(
        operation_id="release-cancel:1", slot="control", method="release", input=None
    )
    child.cancel()
    try:
        await child
    except asyncio.CancelledError:
        pass
    return "cancelled-locally"


async def abandoned_call(context: RunContext):
    child = asyncio.create_task(
        context.run_child_flow(operation_id="abandoned-child:1", slot="child", input=None)
    )
    await asyncio.sleep(0)
    await context.call_capability(
        operation_id="release-abandon:1", slot="control", method="release", input=None
    )
    assert not child.done()
    return "abandoned"


CASES = {
    "fanout-65": fanout,
    "operation-identity": operation_identity,
    "cancel-shared-waiter": cancel_shared_waiter,
    "uncertain-replay": uncertain_replay,
    "request-lifetime": request_lifetime,
    "one-flow": one_flow,
    "two-effects": two_effects,
    "cancel-one-call": cancel_one_call,
    "abandoned-call": abandoned_call,
}


async def run(context: RunContext) -> RunResult:
    case = context.input.get("case") if isinstance(context.input, dict) else None
    behaviour = CASES.get(case)
    if behaviour is None:
        return {"outcome": "done", "output": None}
    return {"outcome": "done", "output": await behaviour(context)}


handle(run)
