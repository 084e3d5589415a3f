"""Write the JSON of a rendered host.toml value (stdin) as TOML (stdout).

Enough TOML for what the module renders: top-level tables, arrays of
tables, and inline tables and arrays inside them. Keys are quoted.
"""

import json
import sys


def value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float, str)):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {value(x)}" for k, x in v.items()) + " }"
    raise TypeError(f"no TOML for {v!r}")


def table(header, entries):
    return [header] + [f"{json.dumps(k)} = {value(v)}" for k, v in entries.items()]


doc = json.load(sys.stdin)
lines = [f"{json.dumps(k)} = {value(v)}" for k, v in doc.items() if not isinstance(v, (dict, list))]
for key, v in doc.items():
    if isinstance(v, dict):
        lines += table(f"[{json.dumps(key)}]", v)
    elif isinstance(v, list) and all(isinstance(x, dict) for x in v):
        for item in v:
            lines += table(f"[[{json.dumps(key)}]]", item)
    elif isinstance(v, list):
        lines.insert(0, f"{json.dumps(key)} = {value(v)}")
print("\n".join(lines))
