// @jigging/flow/gate.js: jig's preload for a Bun Run (`bun --preload`).
// jig executes the runtime with a pipe at descriptor 3, the gate, so that
// a daemon can start the next Run's runtime ahead of it. This module loads
// the SDK, then waits for the one byte jig writes once the Run is recorded
// and closes the gate, before the runtime loads the package's entrypoint:
// no package code runs before its Run. For a Run started at once, the byte
// is already there.

import "./index.js";
import fs from "node:fs";

const GATE_FD = 3;
// Exit status when jig let go of the gate without opening it.
const EXIT_ABANDONED = 70;

const byte = new Uint8Array(1);
let read = 0;
for (;;) {
  try {
    read = fs.readSync(GATE_FD, byte);
    break;
  } catch (error) {
    if (error?.code !== "EINTR") throw error;
  }
}
fs.closeSync(GATE_FD);
if (read !== 1) process.exit(EXIT_ABANDONED);
