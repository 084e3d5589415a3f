#!/bin/sh
# Builds the component and checks one call through the host's loader.
set -eu
cd "$(dirname "$0")"
python3 -c 'import sys; print("CONTRACT = " + repr(open(sys.argv[1]).read()))' \
  @NAME@.capability.json > contract.py
"${COMPONENTIZE_PY:-componentize-py}" -d wit -w capability-provider componentize app -o @NAME@.wasm >&2
out=$(jig provider call @NAME@.wasm \
  --contract https://example.invalid/contracts/@NAME@@0.1.0 \
  --method greet --input '{"name": "Ada"}')
test "$out" = '"Hello, Ada!"' || { echo "unexpected answer: $out" >&2; exit 1; }
echo "ok: $out"
