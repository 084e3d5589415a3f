"""The Run/1 conformance "channels component", on jiggy.flow."""

import asyncio

from jiggy.flow import OperationError, RunContext, RunResult, handle


async def run(context: RunContext) -> RunResult:
    pair = await context.channel()

    async def invoke():
        try:
            return await context.call_capability(
                operation_id="answer",
                slot="worker",
                method="run",
                input=context.input,
                channels={"events": pair.send},
            )
        except (Exception, asyncio.CancelledError):
            # Rejected admission may leave no producer to end the stream.
            try:
                await pair.receive.aclose()
            except (Exception, asyncio.CancelledError):
                pass  # keep the execution failure
            raise

    async def observe():
        values = []
        try:
            # Read to the end or to a failure, either of which settles the
            # receiver; it is not closed, so a failed read sends nothing more.
            async for value in pair.receive:
                values.append(value)
        except OperationError as error:
            if error.code != "LAGGED":
                raise
            return False, values
        return True, values

    work, observed = await asyncio.gather(invoke(), observe(), return_exceptions=True)
    if isinstance(work, BaseException):
        raise work
    if isinstance(observed, BaseException):
        raise observed
    complete, values = observed
    return {"outcome": "done", "output": {"complete": complete, "values": values, "work": work}}


handle(run)
