#!/bin/sh
# Builds the component and checks one call through the host's loader.
set -eu
cd "$(dirname "$0")"
cargo build --quiet --release --target wasm32-wasip2
out=$(jig provider call "${CARGO_TARGET_DIR:-target}/wasm32-wasip2/release/@CRATE@.wasm" \
  --contract https://example.invalid/contracts/@NAME@@0.1.0 \
  --method greet --input '{"name": "Ada"}')
test "$out" = '"Hello, Ada!"' || { echo "unexpected answer: $out" >&2; exit 1; }
echo "ok: $out"
