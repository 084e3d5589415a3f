"""The contract digest program of Capability Contract/1 conformance case 7,
on jiggy.flow.contract: one descriptor on stdin, its digest on stdout."""

import sys

from jiggy.flow.contract import Json1Error, capability_digest, channel_digest

DIGESTS = {"capability": capability_digest, "channel": channel_digest}

if len(sys.argv) != 2 or sys.argv[1] not in DIGESTS:
    sys.exit("usage: contract_digest.py capability|channel < DESCRIPTOR")
try:
    print(DIGESTS[sys.argv[1]](sys.stdin.buffer.read()))
except Json1Error as error:
    sys.exit(f"not JSON/1: {error}")
