/*
 * jig_provider.h -- the C ABI of a native jig capability provider, version 2.
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
 *                "deadlineUnixMs": 1700000000000,
 *                "ports": [{"name": "events", "direction": "send"}]},
 *    "method": "get", "input": <value>, "settings": {...},
 *    "secrets": {"<name>": "<value>"}}
 *
 * Response (status JIG_PROVIDER_OK), exactly one member:
 *   {"value": <value>}                                   success
 *   {"error": {"name": "<declared error>", "data": <v>}} application error
 *   {"operational": {"code": "<Run/1 code>", "message": "...",
 *                    "details": <v, optional>}}          operational error
 *
 * Channels (version 2): "ports" lists the channel ports of the method
 * that the caller connected (Channel Contract/1 declarations in the
 * contract's method object), sorted by name. The library reaches them
 * through the jig_provider_host table passed to jig_provider_call, by port
 * name; the table and its context are valid only until that call returns.
 * Each function blocks until it settles and returns JIG_CHANNEL_OK or
 * JIG_CHANNEL_FAILED; its answer is a host-owned buffer the library must
 * release with host->free (out is NULL when there is none):
 *   send   item is JSON text; OK answers nothing
 *   next   OK answers {"item": {"sequence": n, "value": v}} or {"end": true}
 *   close  seals the send port; OK answers nothing
 *   FAILED answers {"code": "<Run/1 code>", "message": "..."}: e.g.
 *          PERMISSION_DENIED (port not granted in that direction),
 *          INVALID_INPUT (item refused), DISCONNECTED, LAGGED, and
 *          DEADLINE_EXCEEDED / CANCELLED, with which the host wakes a
 *          blocked function when the call's deadline passes or the call is
 *          cancelled. The host seals a send port the library did not close
 *          when the call succeeds, and fails it when the call fails.
 *
 * Rust authors get all of this from jig-provider-sdk's export_provider!.
 */
#ifndef JIG_PROVIDER_H
#define JIG_PROVIDER_H

#include <stddef.h>
#include <stdint.h>

#define JIG_PROVIDER_ABI_VERSION 2u

/* Status codes returned by jig_provider_contracts and jig_provider_call. */
#define JIG_PROVIDER_OK 0          /* out holds the JSON answer */
#define JIG_PROVIDER_PANICKED 1    /* the provider failed; out holds UTF-8 text or is NULL */
#define JIG_PROVIDER_BAD_REQUEST 2 /* the request was malformed; out holds UTF-8 text or is NULL */

/* Status codes of the jig_provider_host functions. */
#define JIG_CHANNEL_OK 0     /* settled; out holds the answer or is NULL */
#define JIG_CHANNEL_FAILED 1 /* out holds {"code", "message"} */

/* The host functions of one call; see Channels above. */
typedef struct jig_provider_host {
    const void *context; /* pass back unchanged */
    int32_t (*send)(const void *context, const uint8_t *port_ptr, size_t port_len,
                    const uint8_t *value_ptr, size_t value_len,
                    uint8_t **out_ptr, size_t *out_len);
    int32_t (*next)(const void *context, const uint8_t *port_ptr, size_t port_len,
                    uint8_t **out_ptr, size_t *out_len);
    int32_t (*close)(const void *context, const uint8_t *port_ptr, size_t port_len,
                     uint8_t **out_ptr, size_t *out_len);
    void (*free)(const void *context, uint8_t *ptr, size_t len);
} jig_provider_host;

/* Must return JIG_PROVIDER_ABI_VERSION; the host refuses to load otherwise. */
uint32_t jig_provider_abi_version(void);

/* Writes a JSON array of the complete Capability Contract/1 descriptors the
 * provider serves. The host validates them and computes their digests. */
int32_t jig_provider_contracts(uint8_t **out_ptr, size_t *out_len);

/* Handles one call; see Request and Response above. host is valid until
 * the call returns. */
int32_t jig_provider_call(const uint8_t *req_ptr, size_t req_len,
                          const jig_provider_host *host,
                          uint8_t **out_ptr, size_t *out_len);

/* Releases a buffer returned through out_ptr/out_len. */
void jig_provider_free(uint8_t *ptr, size_t len);

#endif
