/*
 * jig_provider.h -- the C ABI of a native jig capability provider, version 1.
 *
 * A native provider is a shared library the operator names in the host
 * configuration ([[providers]] kind = "native"). The host loads it once,
 * never unloads it, and may call it from several threads at once, so every
 * function must be thread-safe. It is trusted code: the host cannot
 * interrupt it, so it should honour context.deadlineUnixMs itself.
 *
 * Every buffer is UTF-8 JSON (FLOW JSON/1). A buffer the library returns is
 * owned by the library until the host passes it back to jig_provider_free
 * with the same length. The host validates every returned buffer with the
 * strict JSON/1 parser and reports a malformed one as INVALID_RESULT.
 * Panics/exceptions must never unwind out of these functions.
 *
 * Settings and secrets: the library keeps no configuration. Each request
 * carries the provider's settings object and its secrets (name -> exact
 * UTF-8 file contents read by the host at load time), so one library can
 * serve two [[providers]] entries with different settings. Never put a
 * secret into a response.
 *
 * Request (jig_provider_call input):
 *   {"context": {"contractId": "https://...", "contractVersion": "1.0.0",
 *                "contractDigest": "sha256:...", "operationId": "...",
 *                "deadlineUnixMs": 1700000000000},
 *    "method": "get", "input": <value>, "settings": {...},
 *    "secrets": {"<name>": "<value>"}}
 *
 * Response (status JIG_PROVIDER_OK), exactly one member:
 *   {"value": <value>}                                   success
 *   {"error": {"name": "<declared error>", "data": <v>}} application error
 *   {"operational": {"code": "<Run/1 code>", "message": "...",
 *                    "details": <v, optional>}}          operational error
 *
 * Rust authors get all of this from jig-provider-sdk's export_provider!.
 */
#ifndef JIG_PROVIDER_H
#define JIG_PROVIDER_H

#include <stddef.h>
#include <stdint.h>

#define JIG_PROVIDER_ABI_VERSION 1u

/* Status codes returned by jig_provider_contracts and jig_provider_call. */
#define JIG_PROVIDER_OK 0          /* out holds the JSON answer */
#define JIG_PROVIDER_PANICKED 1    /* the provider failed; out holds UTF-8 text or is NULL */
#define JIG_PROVIDER_BAD_REQUEST 2 /* the request was malformed; out holds UTF-8 text or is NULL */

/* Must return JIG_PROVIDER_ABI_VERSION; the host refuses to load otherwise. */
uint32_t jig_provider_abi_version(void);

/* Writes a JSON array of the complete Capability Contract/1 descriptors the
 * provider serves. The host validates them and computes their digests. */
int32_t jig_provider_contracts(uint8_t **out_ptr, size_t *out_len);

/* Handles one call; see Request and Response above. */
int32_t jig_provider_call(const uint8_t *req_ptr, size_t req_len,
                          uint8_t **out_ptr, size_t *out_len);

/* Releases a buffer returned through out_ptr/out_len. */
void jig_provider_free(uint8_t *ptr, size_t len);

#endif
