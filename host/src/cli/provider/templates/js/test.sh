#!/bin/sh
# Builds the component and checks one call through the host's loader.
set -eu
cd "$(dirname "$0")"
{ printf 'const CONTRACT = '; cat @NAME@.capability.json; printf ';\n'; cat provider.js; } > build.js
"${JCO:-jco}" componentize build.js --wit wit --world-name capability-provider --disable all -o @NAME@.wasm >&2
out=$(jig provider call @NAME@.wasm \
  --contract https://example.invalid/contracts/@NAME@@0.1.0 \
  --method greet --input '{"name": "Ada"}')
test "$out" = '"Hello, Ada!"' || { echo "unexpected answer: $out" >&2; exit 1; }
echo "ok: $out"
