// @ts-self-types="./contract.d.ts"
// @jigging/flow/contract: FLOW contract descriptor digests (Capability
// Contract/1 §3, Channel Contract/1 §2):
//
//   SHA-256(UTF8("FLOW-Capability-Contract/1\0") || RFC8785(descriptor))
//   SHA-256(UTF8("FLOW-Channel-Contract/1\0") || RFC8785(descriptor))
//
// spelled `sha256:<64 lowercase hex>`. A descriptor is given as its bytes
// (parsed strictly as JSON/1: a duplicate member or an out-of-domain number is
// refused, never repaired) or as an already parsed value. Only the digest is
// computed: the descriptor's Contract/1 rules are the host's to check. It is
// apart from the package root, whose Run SDK/1 surface the standard closes.
// node:crypto is the runtime's own SHA-256 on Node, Bun and Deno alike.

import { createHash } from "node:crypto";
import { canonicalize, Json1Error, parse } from "./json1.js";

export const CAPABILITY_DOMAIN = "FLOW-Capability-Contract/1\0";
export const CHANNEL_DOMAIN = "FLOW-Channel-Contract/1\0";
/** Maximum UTF-8 bytes of one descriptor (both kinds). */
export const MAX_DESCRIPTOR_BYTES = 262_144;

const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/** RFC 8785 text of a JSON/1 value; throws Json1Error outside JSON/1. */
export function canonical(value) {
  return canonicalize(value);
}

/** The Capability Contract/1 digest of a descriptor (bytes or parsed value). */
export function capabilityDigest(descriptor) {
  return digest(CAPABILITY_DOMAIN, descriptor);
}

/** The Channel Contract/1 digest of a descriptor (bytes or parsed value). */
export function channelDigest(descriptor) {
  return digest(CHANNEL_DOMAIN, descriptor);
}

function digest(domain, descriptor) {
  if (descriptor instanceof Uint8Array) {
    if (descriptor.length > MAX_DESCRIPTOR_BYTES) throw new Json1Error("descriptor exceeds 262,144 bytes");
    let text;
    try {
      text = utf8.decode(descriptor);
    } catch {
      throw new Json1Error("descriptor is not UTF-8");
    }
    descriptor = parse(text);
  }
  const hash = createHash("sha256");
  hash.update(domain, "utf8");
  hash.update(canonicalize(descriptor), "utf8");
  return `sha256:${hash.digest("hex")}`;
}

export { Json1Error };
