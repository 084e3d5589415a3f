// Runs a wasm32-wasip1 component under Node's WASI (preview1) with the
// process's own stdin/stdout/stderr, so flow-conformance can drive a
// flow-sdk example built for wasm:
//
//   printf '#!/bin/sh\nexec node --no-warnings conformance/tools/wasi-run.mjs target/guests/wasm32-wasip1/debug/examples/standard.wasm\n' > /tmp/standard
//   chmod +x /tmp/standard && target/debug/flow-conformance -- /tmp/standard
//
// returnOnExit stays false: with it, Node 20+ crashes at exit after a
// 16 MiB frame grew the instance memory.
import { readFileSync } from 'node:fs';
import { WASI } from 'node:wasi';

const path = process.argv[2];
const wasi = new WASI({
  version: 'preview1',
  args: [path],
  env: {},
  stdin: 0,
  stdout: 1,
  stderr: 2,
  returnOnExit: false,
});
const module = await WebAssembly.compile(readFileSync(path));
const instance = await WebAssembly.instantiate(module, wasi.getImportObject());
wasi.start(instance);
