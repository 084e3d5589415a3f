import re

from jiggy.flow import RunContext, RunResult, handle

KEYWORDS = {
    "bug": {"crash", "crashes", "error", "broken", "fails", "bug", "exception"},
    "feature": {"add", "support", "would", "wish", "feature", "please"},
}


async def run(context: RunContext) -> RunResult:
    words = set(re.findall(r"[a-z]+", str(context.input).lower()))
    for label, keys in KEYWORDS.items():
        hits = sorted(words & keys)
        if hits:
            return {"outcome": "done", "output": {"label": label, "evidence": hits}}
    return {"outcome": "done", "output": {"label": "question", "evidence": []}}


handle(run)
