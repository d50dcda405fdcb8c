/* libfabric rails: one RDM endpoint per stream, under the same frames, scheduler, acks and
 * failover as the socket transport (tx.c, rx.c).
 *
 * libfabric is loaded at run time (libfabric.so.1): the plugin loads, and the socket transport
 * runs, on machines without it.  Provider: FI_PROVIDER when set (libfabric applies it), else the
 * best RDM provider found (hardware ones first: efa, cxi, verbs;ofi_rxm, psm3, opx; then
 * tcp;ofi_rxm).  Each stream's endpoint is opened on the domain named like its rail's interface
 * (tcp: the domain is the interface), else on domain rail % domains.
 *
 * On an endpoint, a frame is two messages: its 40-byte header as an untagged message (injected;
 * send-after-send ordered, so headers arrive in frame order) and its payload as a tagged message
 * whose tag is the frame's number on the stream.  The receiver reads the header from a ring of
 * posted header buffers, decides where the payload goes (the posted buffer at the frame's offset,
 * or a discard buffer for duplicates) and posts the tagged receive there: payloads land in place,
 * no copy.  Acknowledgements are headers going the other way.
 *
 * Memory registration follows the provider's mode bits: with FI_MR_LOCAL (or for device memory)
 * buffers are registered through a per-endpoint cache (bound to the endpoint under
 * FI_MR_ENDPOINT), otherwise descriptors are NULL. */
#ifndef BRAID_OFI_H
#define BRAID_OFI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "wire/ofi.h" /* BRAID_OFI_NAME_MAX: the endpoint address's wire format */

#define BRAID_OFI_HDR_BYTES 40

struct braid_ofi_ep;

/* Loads libfabric and picks the provider, once per process.  1 when usable (*hw: a hardware
 * provider), 0 with the reason in why. */
int braid_ofi_probe(int *hw, char *why, size_t whylen);
/* The chosen provider's name and fabric, for logs ("" before a successful probe). */
const char *braid_ofi_provider(void);
/* The memory types (NCCL_PTR_*) braid's ofi rails carry on the chosen provider, probed once:
 * NCCL_PTR_HOST, with the reason GPU memory is not carried in why (the provider lacks FI_HMEM;
 * libfabric's CUDA interface is missing, as in Debian's build; or braid's staging through host
 * buffers).  Call after a successful braid_ofi_probe. */
int braid_ofi_hmem(char *why, size_t whylen);
/* The same probe for provider prov (not cached; for tests and diagnostics). */
int braid_ofi_hmem_of(const char *prov, char *why, size_t whylen);

/* An endpoint on rail's domain (named like the interface rail_name when one is).  NULL with the
 * reason in err. */
struct braid_ofi_ep *braid_ofi_ep_open(const char *rail_name, int rail, char *err, size_t errlen);
/* The endpoint's address, to send to the peer; its length. */
size_t braid_ofi_ep_name(const struct braid_ofi_ep *e, uint8_t *out, size_t cap);
/* Inserts the peer's address; 0, or -1 with the reason in err. */
int braid_ofi_ep_connect(struct braid_ofi_ep *e, const uint8_t *name, size_t len, char *err,
                         size_t errlen);
/* Closes the endpoint; operations still under way are cancelled first.  false when some did
 * not finish within 200 ms: the endpoint is then left open for good, and the memory those
 * operations use must stay allocated.  A receive into the application's memory is waited for
 * up to BRAID_TIMEOUT_MS; one the provider still holds then stops the process (abort, with a
 * WARN): the application frees that memory after the close. */
bool braid_ofi_ep_close(struct braid_ofi_ep *e);
/* fi_cancel; a unit test puts one that cancels nothing here (test/unit/ofi_test.cc). */
struct fid;
extern ssize_t (*braid_ofi_cancel_hook)(struct fid *fid, void *ctx);
/* Whether the provider is an ofi_rxm one (tcp;ofi_rxm, verbs;ofi_rxm): there braid receives every
 * payload into its own buffers, posted ahead of the data with room for BRAID_OFI_RXM_FRAME_MAX
 * bytes, and a sender starts a frame only once the receiver has granted it (ofi_rx.c, ofi_tx.c:
 * no payload ever arrives unexpected); frames are at most that long whatever BRAID_CHUNK_BYTES
 * says. */
bool braid_ofi_rxm(void);
#define BRAID_OFI_RXM_FRAME_MAX (512u << 10)
/* Registers every buffer, even where the provider does not ask for it (tests the cache). */
void braid_ofi_ep_force_registration(struct braid_ofi_ep *e);
/* The memory [addr, addr+len) is being released (NCCL's deregMr, a freed buffer): cached
 * registrations overlapping it are dropped (once no operation uses them), so a later buffer at
 * the same address is registered afresh. */
void braid_ofi_ep_forget(struct braid_ofi_ep *e, const void *addr, size_t len);
/* Registrations made and cache hits so far (tests). */
void braid_ofi_ep_mr_counts(const struct braid_ofi_ep *e, uint64_t *regs, uint64_t *hits);

/* Posting calls return 0, -EAGAIN (no room now: progress and retry), or -EIO after an error
 * (braid_ofi_error says which; the endpoint is then unusable). */
int braid_ofi_send_hdr(struct braid_ofi_ep *e, const uint8_t hdr[BRAID_OFI_HDR_BYTES]);
int braid_ofi_send_payload(struct braid_ofi_ep *e, const void *buf, size_t len, uint64_t tag,
                           void *ctx);
/* app: buf is the application's (NCCL's) memory, which it frees once the connection is closed:
 * braid_ofi_ep_close never returns with such a receive still posted (see there). */
int braid_ofi_recv_payload(struct braid_ofi_ep *e, void *buf, size_t len, uint64_t tag, void *ctx,
                           bool app);
/* Asks to cancel the posted payload receive with ctx; its completion still comes (cancelled, or
 * done when it had already matched). */
void braid_ofi_cancel(struct braid_ofi_ep *e, void *ctx);

enum braid_ofi_status { BRAID_OFI_OK = 0, BRAID_OFI_CANCELED, BRAID_OFI_TRUNCATED, BRAID_OFI_FAILED };

struct braid_ofi_done {
  void *ctx;
  size_t len;
  enum braid_ofi_status status;
};

/* Drives the endpoint: reads its completion queue, queues arrived headers, returns up to max
 * finished payload sends and receives.  -1 after an endpoint error (braid_ofi_error). */
int braid_ofi_progress(struct braid_ofi_ep *e, struct braid_ofi_done *out, int max);
/* The oldest arrived header not yet consumed, or NULL; braid_ofi_hdr_consume re-posts its buffer. */
const uint8_t *braid_ofi_hdr_peek(struct braid_ofi_ep *e);
void braid_ofi_hdr_consume(struct braid_ofi_ep *e);
/* Payload operations posted and not yet reported by progress. */
int braid_ofi_outstanding(const struct braid_ofi_ep *e);
const char *braid_ofi_error(const struct braid_ofi_ep *e);

#endif
