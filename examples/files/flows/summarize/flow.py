import hashlib
import json
import os

from jiggy.flow import RunContext, RunResult, handle


def files_under(root: str) -> list[str]:
    found = []
    for directory, _dirs, names in os.walk(root):
        for name in names:
            found.append(os.path.relpath(os.path.join(directory, name), root))
    return sorted(found)


async def run(context: RunContext) -> RunResult:
    source = context.attachments["source"]["path"]
    deliverables = context.attachments["deliverables"]["path"]
    index = []
    for relative in files_under(source):
        with open(os.path.join(source, relative), "rb") as handle_:
            data = handle_.read()
        index.append(
            {
                "path": relative,
                "bytes": len(data),
                "lines": data.count(b"\n"),
                "sha256": hashlib.sha256(data).hexdigest(),
            }
        )
    total = sum(entry["bytes"] for entry in index)
    lines = [f"# Summary of {len(index)} files ({total} bytes)", ""]
    lines += [f"- {e['path']}: {e['bytes']} bytes, {e['lines']} lines" for e in index]
    with open(os.path.join(deliverables, "summary.md"), "w", encoding="utf-8") as out:
        out.write("\n".join(lines) + "\n")
    os.makedirs(os.path.join(deliverables, "data"), exist_ok=True)
    with open(os.path.join(deliverables, "data", "index.json"), "w", encoding="utf-8") as out:
        json.dump(index, out, sort_keys=True)
    delay = context.input.get("sleepSeconds", 0) if isinstance(context.input, dict) else 0
    if delay:
        import asyncio

        await asyncio.sleep(delay)
    return {"outcome": "done", "output": {"files": len(index), "bytes": total}}


handle(run)
