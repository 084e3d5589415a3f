from jiggy.flow import handle

# The structured answer the Agent must give (the responseSchema profile:
# closed objects, every property required, bounded arrays).
VERDICT = {
    "$schema": "https://flow.jig.md/schemas/schema-1.json",
    "type": "object",
    "properties": {
        "verdict": {"type": "string", "enum": ["approve", "request-changes"]},
        "concerns": {"type": "array", "items": {"type": "string"}, "maxItems": 5},
    },
    "required": ["verdict", "concerns"],
    "additionalProperties": False,
}


async def run(ctx):
    change = ctx.input if isinstance(ctx.input, str) else "(no change given)"
    result = await ctx.call_capability(
        operation_id="review:1",
        slot="agent",
        method="run",
        input={
            "instructions": f"Review this change:\n\n{change}",
            "skills": ["code-review"],
            "responseSchema": VERDICT,
        },
    )
    if result["outcome"] != "completed":
        return {"outcome": "done", "output": {"outcome": result["outcome"], "text": result["text"]}}
    return {"outcome": "done", "output": result["structured"]}


handle(run)
