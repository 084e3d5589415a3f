"""The Run/1 conformance "standard component", on jiggy.flow."""

import asyncio

from jiggy.flow import CapabilityError, RunContext, RunResult, handle


async def run(context: RunContext) -> RunResult:
    research, stored = await asyncio.gather(
        context.run_child_flow(
            operation_id="research:1",
            slot="research",
            intent="Find a useful comparison target.",
            input=context.input,
        ),
        context.call_capability(
            operation_id="store:1",
            slot="artifacts",
            method="write",
            input={"source": "research"},
        ),
    )
    try:
        await context.call_capability(
            operation_id="missing:1",
            slot="artifacts",
            method="read",
            input={"uri": "artifact://missing"},
        )
    except CapabilityError as error:
        missing = error.error_name
    else:
        raise RuntimeError("missing:1 returned a value instead of its declared error")
    return {
        "outcome": "done",
        "output": {"research": research, "stored": stored, "missing": missing},
    }


handle(run)
