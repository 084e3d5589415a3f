"""The Run/1 conformance "channel-wiring component", on jiggy.flow.

`input.role` is root, worker or monitor; the root wires a contract-typed
channel from a worker child to a monitor child.
"""

import asyncio

from jiggy.flow import OperationError, RunContext, RunResult, handle


async def root(context: RunContext):
    updates = await context.channel(contract="./updates.json")
    try:
        await context.run_child_flow(
            operation_id="incompatible",
            slot="incompatible",
            input=None,
            channels={"events": updates.send},
        )
    except OperationError as error:
        if error.code != "INVALID_INPUT":
            raise
    else:
        raise RuntimeError("the incompatible child accepted the events channel")
    monitor_channels = {"events": updates.receive}
    if "progress" in context.channels:
        monitor_channels["progress"] = context.channels["progress"]
    stop = context.input.get("stop", False)
    outcomes = await asyncio.gather(
        context.run_child_flow(
            operation_id="worker",
            slot="worker",
            input={"role": "worker"},
            channels={"events": updates.send},
        ),
        context.run_child_flow(
            operation_id="monitor",
            slot="monitor",
            input={"role": "monitor", "stop": stop},
            channels=monitor_channels,
        ),
        return_exceptions=True,
    )
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            raise outcome
    work, monitor = outcomes
    return {"incompatible": True, "work": work, "monitor": monitor}


async def worker(context: RunContext):
    return await context.call_capability(
        operation_id="answer",
        slot="agent",
        method="run",
        input=None,
        channels={"events": context.channels["events"]},
    )


async def monitor(context: RunContext):
    events = context.channels["events"]
    progress = context.channels.get("progress")
    stop = context.input.get("stop", False)
    selected = []
    complete = True
    try:
        async with events:
            async for update in events:
                if isinstance(update, dict) and "text" in update:
                    selected.append(update["text"])
                    if progress is not None:
                        await progress.send(update["text"])
                    if stop:
                        complete = False
                        break
    except OperationError as error:
        if error.code != "LAGGED":
            raise
        complete = False
    if progress is not None:
        await progress.close()
    return {"complete": complete, "selected": selected}


ROLES = {"root": root, "worker": worker, "monitor": monitor}


async def run(context: RunContext) -> RunResult:
    role = ROLES.get(context.input.get("role") if isinstance(context.input, dict) else None)
    if role is None:
        raise ValueError("input.role must be root, worker or monitor")
    return {"outcome": "done", "output": await role(context)}


handle(run)
