import asyncio
import os

from jiggy.flow import RunContext, RunResult, handle


def chapter_text(index: int, title: str) -> str:
    return f"# {index}. {title}\n\nThis chapter is finished.\n"


async def run(context: RunContext) -> RunResult:
    deliverables = context.attachments["deliverables"]["path"]
    chapters = context.input.get("chapters", [])
    fail_after = context.input.get("failAfter")
    wait_after = context.input.get("waitAfter")
    draft = os.path.join(deliverables, "draft.md")
    finished: dict[str, str] = {}
    receipts = []
    for index, title in enumerate(chapters, start=1):
        # Work in progress lives in the attachment too, but only what a
        # save accepted is delivered when the Run does not succeed.
        with open(draft, "w", encoding="utf-8") as out:
            out.write(f"working on {title}\n")
        name = f"chapters/{index:02}-{title}.md"
        text = chapter_text(index, title)
        os.makedirs(os.path.join(deliverables, "chapters"), exist_ok=True)
        with open(os.path.join(deliverables, name), "w", encoding="utf-8") as out:
            out.write(text)
        finished[name] = text
        receipt = await context.call_capability(
            operation_id=f"save-{index}",
            slot="progress",
            method="save",
            input={
                "sequence": index,
                "evidence": {"chaptersDone": index, "last": title},
                "files": finished,
            },
        )
        receipts.append(receipt)
        if fail_after == index:
            raise RuntimeError(f"stopped after chapter {index}")
        if wait_after == index:
            with open(draft, "w", encoding="utf-8") as out:
                out.write("working on what comes next\n")
            await asyncio.sleep(3600)
    if os.path.exists(draft):
        os.remove(draft)
    contents = "".join(f"- {name}\n" for name in finished)
    with open(os.path.join(deliverables, "contents.md"), "w", encoding="utf-8") as out:
        out.write(contents)
    return {"outcome": "done", "output": {"chapters": len(finished), "receipts": receipts}}


handle(run)
