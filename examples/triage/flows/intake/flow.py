from jiggy.flow import RunContext, RunResult, handle

ROUTES = {"bug": "maintainers", "feature": "roadmap", "question": "help-desk"}


async def run(context: RunContext) -> RunResult:
    text = context.input.strip()
    if not text:
        return {"outcome": "rejected", "output": {"reason": "empty request"}}
    child = await context.run_child_flow(
        operation_id="classify:1", slot="classifier", input=text
    )
    label = child["output"]["label"]
    return {
        "outcome": "done",
        "output": {
            "request": text,
            "label": label,
            "route": ROUTES.get(label, "help-desk"),
            "classifier": child,
        },
    }


handle(run)
