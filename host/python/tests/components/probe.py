"""Test-only component: `input.case` selects one SDK behaviour to observe."""

import asyncio
import os
import subprocess
import sys

from jiggy.flow import CapabilityError, OperationError, RunContext, RunResult, handle

print("imported before handle", end="")  # buffered: must not reach protocol stdout


async def context_view(context: RunContext):
    return {
        "input": context.input,
        "settings": dict(context.settings),
        "attachments": {name: dict(a) for name, a in context.attachments.items()},
        "channels": {
            name: {"direction": e.direction, "delivery": e.delivery}
            for name, e in context.channels.items()
        },
        "scratch": context.scratch,
        "deadline": context.deadline_unix_ms,
    }


async def noisy(context: RunContext):
    print("print goes to stderr")
    sys.stdout.write("sys.stdout goes to stderr\n")
    sys.stdout.flush()
    os.write(1, b"fd 1 goes to stderr\n")
    subprocess.run(["echo", "child stdout goes to stderr"], check=True)
    leaked = subprocess.run(["cat"], capture_output=True, check=True).stdout
    return {"child-read-stdin": leaked.decode()}


async def capability_outcomes(context: RunContext):
    try:
        await context.call_capability(
            operation_id="declared:1", slot="store", method="read", input=None
        )
    except CapabilityError as error:
        declared = {"name": error.error_name, "data": error.data}
    try:
        await context.run_child_flow(operation_id="operational:1", slot="child", input=None)
    except OperationError as error:
        operational = {"code": error.code, "message": error.message, "details": error.details}
    return {"declared": declared, "operational": operational}


async def invalid_arguments(context: RunContext):
    failures = []
    attempts = [
        dict(operation_id="bad id", slot="s", method="m", input=None),
        dict(operation_id="ok:1", slot="Bad", method="m", input=None),
        dict(operation_id="ok:1", slot="s", method="m", input=float("nan")),
        dict(operation_id="ok:1", slot="s", method="m", input=2**53),
        dict(operation_id="ok:1", slot="s", method="m", input={1: "non-string key"}),
        dict(operation_id="ok:1", slot="s", method="m", input="\ud800"),
    ]
    for arguments in attempts:
        try:
            await context.call_capability(**arguments)
        except (TypeError, ValueError) as error:
            failures.append(type(error).__name__)
    return failures


async def after_return(context: RunContext):
    mutable = {"value": 1}
    call = asyncio.create_task(
        context.call_capability(operation_id="snap:1", slot="s", method="m", input=mutable)
    )
    await asyncio.sleep(0)
    mutable["value"] = 2
    return {"value": await call}


async def lifetime_in_batches(context: RunContext):
    """65,536 calls 64 at a time, then one more that must be refused locally."""
    accepted = 0
    for batch in range(65_536 // 64):
        values = await asyncio.gather(
            *(
                context.call_capability(
                    operation_id=f"lifetime:{batch * 64 + index + 1}",
                    slot="sink",
                    method="write",
                    input=None,
                )
                for index in range(64)
            )
        )
        accepted += len(values)
    try:
        await context.call_capability(
            operation_id="lifetime:65537", slot="sink", method="write", input=None
        )
    except OperationError as error:
        return {"accepted": accepted, "rejected": error.code, "message": error.message}
    raise RuntimeError("the 65,537th request was not refused")


async def channel_behaviour(context: RunContext, behaviour: str):
    if behaviour == "abandon-subscription":
        source = await context.channel(delivery="broadcast")
        await source.subscribe()
        return "returned-with-an-unread-subscription"
    if behaviour == "cancel-read":
        pair = await context.channel()
        read = asyncio.ensure_future(pair.receive.__anext__())
        await asyncio.sleep(0.05)
        read.cancel()
        try:
            await read
        except asyncio.CancelledError:
            pass
        try:
            await pair.receive.aclose()
        except OperationError as error:
            return f"close raised {error.code}"
        return "disposed"
    if behaviour == "reuse-claimed":
        pair = await context.channel()
        await pair.send.send(1)
        try:
            await context.call_capability(
                operation_id="x:1",
                slot="s",
                method="m",
                input=None,
                channels={"events": pair.send},
            )
        except ValueError:
            return "refused"
    if behaviour == "schema-and-contract":
        try:
            await context.channel(schema=True, contract="./c.json")
        except ValueError:
            return "refused"
    raise RuntimeError(f"unknown channel behaviour {behaviour}")


async def settlement_reserve_window(context: RunContext):
    """64 calls while a subscription may need settling, then its release."""
    source = await context.channel(delivery="broadcast")
    reader = await source.subscribe()
    calls = [
        asyncio.ensure_future(
            context.call_capability(
                operation_id=f"reserve:{index}", slot="sink", method="write", input=None
            )
        )
        for index in range(1, 65)
    ]
    await asyncio.sleep(0.05)  # every call admitted before the release
    await reader.aclose()
    return {"settled": len(await asyncio.gather(*calls))}


async def settlement_reserve_lifetime(context: RunContext):
    """Calls 63 at a time until refused while a subscription is held, then release it."""
    source = await context.channel(delivery="broadcast")
    reader = await source.subscribe()
    accepted, refused = 0, []
    while not refused:
        results = await asyncio.gather(
            *(
                context.call_capability(
                    operation_id=f"reserve:{accepted + index + 1}",
                    slot="sink",
                    method="write",
                    input=None,
                )
                for index in range(63)
            ),
            return_exceptions=True,
        )
        for result in results:
            if isinstance(result, OperationError):
                refused.append(result.code)
            elif isinstance(result, BaseException):
                raise result
            else:
                accepted += 1
    await reader.aclose()
    return {"accepted": accepted, "refused": sorted(set(refused))}


async def ignore_cancellation(context: RunContext):
    try:
        await asyncio.sleep(3600)
    except asyncio.CancelledError:
        pass
    return {"outcome": "done", "output": "ignored"}


def recurse(depth: int):
    if depth == 0:
        raise ValueError("at the bottom")
    return recurse(depth - 1)


async def run(context: RunContext) -> RunResult:
    case = context.input.get("case") if isinstance(context.input, dict) else None
    if case == "context":
        return {"outcome": "done", "output": await context_view(context)}
    if case == "result":
        return context.input["result"]
    if case == "python-result":
        return eval(context.input["expression"])  # test-only: unrepresentable values
    if case == "exit":
        sys.exit(0)
    if case == "raise":
        raise RuntimeError(context.input["message"])
    if case == "lone-surrogate":
        raise RuntimeError("half \ud800 a pair")
    if case == "key-error":
        return {"outcome": "done", "output": context.input["data"]}
    if case == "recurse":
        return recurse(int(context.input["depth"]))
    if case == "operation-error":
        raise OperationError(context.input["code"], "refused here", context.input.get("details"))
    if case == "noisy":
        return {"outcome": "done", "output": await noisy(context)}
    if case == "capability-outcomes":
        return {"outcome": "done", "output": await capability_outcomes(context)}
    if case == "invalid-arguments":
        return {"outcome": "done", "output": await invalid_arguments(context)}
    if case == "snapshot":
        return {"outcome": "done", "output": await after_return(context)}
    if case == "lifetime":
        return {"outcome": "done", "output": await lifetime_in_batches(context)}
    if case == "channel":
        return {
            "outcome": "done",
            "output": await channel_behaviour(context, context.input["behaviour"]),
        }
    if case == "settlement-reserve-window":
        return {"outcome": "done", "output": await settlement_reserve_window(context)}
    if case == "settlement-reserve-lifetime":
        return {"outcome": "done", "output": await settlement_reserve_lifetime(context)}
    if case == "sleep":
        await asyncio.sleep(3600)
    if case == "ignore-cancellation":
        return await ignore_cancellation(context)
    return {"outcome": "done", "output": None}


handle(run)
