// The contract digest program of Capability Contract/1 conformance case 7, on
// @jigging/flow/contract: one descriptor on stdin, its digest on stdout.
import fs from "node:fs";
import process from "node:process";
import { capabilityDigest, channelDigest } from "../../flow/contract.js";

const digests = { capability: capabilityDigest, channel: channelDigest };
const compute = digests[process.argv[2]];
if (process.argv.length !== 3 || !compute) {
  console.error("usage: contract_digest.js capability|channel < DESCRIPTOR");
  process.exit(2);
}
try {
  process.stdout.write(`${compute(fs.readFileSync(0))}\n`);
} catch (error) {
  console.error(`not JSON/1: ${error.message}`);
  process.exit(1);
}
