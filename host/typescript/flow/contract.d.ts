// Types of @jigging/flow/contract: FLOW contract descriptor digests.
import type { JsonValue } from "./index.js";

/** A descriptor's bytes or value lie outside FLOW JSON/1. */
export declare class Json1Error extends Error {
  constructor(message: string);
}

/** `"FLOW-Capability-Contract/1\0"`, the capability digest's domain separator. */
export declare const CAPABILITY_DOMAIN: string;
/** `"FLOW-Channel-Contract/1\0"`, the channel digest's domain separator. */
export declare const CHANNEL_DOMAIN: string;
/** Maximum UTF-8 bytes of one descriptor. */
export declare const MAX_DESCRIPTOR_BYTES: number;

/** RFC 8785 text of a JSON/1 value. Throws `Json1Error` outside JSON/1. */
export declare function canonical(value: JsonValue): string;

/**
 * `sha256:<hex>` of `"FLOW-Capability-Contract/1\0" || RFC8785(descriptor)`.
 * Bytes are parsed strictly as JSON/1 first.
 */
export declare function capabilityDigest(descriptor: Uint8Array | JsonValue): string;

/**
 * `sha256:<hex>` of `"FLOW-Channel-Contract/1\0" || RFC8785(descriptor)`.
 * Bytes are parsed strictly as JSON/1 first.
 */
export declare function channelDigest(descriptor: Uint8Array | JsonValue): string;
