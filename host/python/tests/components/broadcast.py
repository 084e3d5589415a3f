"""The Run/1 conformance "broadcast component", on jiggy.flow."""

import asyncio

from jiggy.flow import ChannelReceiver, OperationError, RunContext, RunResult, handle


async def read_all(receiver: ChannelReceiver):
    values = []
    complete = True
    try:
        # To the end or to a failure; the reader is not closed after either.
        async for value in receiver:
            values.append(value)
    except OperationError as error:
        if error.code != "LAGGED":
            raise
        complete = False
    return {"start": receiver.start_sequence, "values": values, "complete": complete}


async def run(context: RunContext) -> RunResult:
    source = await context.channel(delivery="broadcast")
    early = await source.subscribe()
    await source.send.send("before-late")
    late = await source.subscribe()
    await source.send.send("after-late")
    await source.send.close()
    early_view, late_view = await asyncio.gather(read_all(early), read_all(late))
    return {"outcome": "done", "output": {"early": early_view, "late": late_view}}


handle(run)
