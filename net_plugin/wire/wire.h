/* net_plugin/wire/: every byte braid puts on a wire or in NCCL's handle, one header and source per
 * protocol.  Each header starts with its layout, byte by byte; every record has a fixed size
 * (_Static_assert in its source), explicit little-endian encode/decode functions (wire/le.h; no
 * struct is ever copied onto the wire), and a decode that checks lengths and fields and returns
 * -1 with a reason.  Tests: test/unit/wire_layout_test.cc (every record's exact bytes; round
 * trips and rejections of the verbs and ofi records), wire_test.cc (those of the rest); fuzzers:
 * test/fuzz/fuzz_handle.c, fuzz_hello.c, fuzz_raillist.c, fuzz_frame.c, fuzz_transport_wire.c
 * (the verbs and ofi records), fuzz_verbs_ctl.c (the verbs connection behind them).
 *
 *   wire/handle.h  the listen handle (NCCL's 128 bytes, out of band); BRAID_WIRE_VERSION, the
 *                  set-up protocol's version, lives here
 *   wire/hello.h   the stream handshake on every data stream: challenge, hello, reply, and the
 *                  listener's rail list on stream 0 (the logic: comm/hs.h)
 *   wire/frame.h   the socket and ofi streams' frame header: data chunks and acknowledgements
 *   wire/verbs.h   the verbs transport: the rail addresses exchanged at set-up, a verbs
 *                  connection's control messages and its writes' immediate data (its version:
 *                  the handshake's BRAID_WIRE_VERSION)
 *   wire/ofi.h     the ofi transport: each stream's endpoint address, sent after the handshake
 *
 * Elsewhere: braid-ps frames (the CollNet client in the plugin <-> the braid-ps server) are
 * ps_offload/proto.h, shared by both programs: a fixed 48-byte little-endian header with magic
 * and checksum, a versioned HELLO, and a decoder that checks every type's payload length (fuzzed
 * by test/fuzz/fuzz_ps_frames.c and fuzz_collnet_client.c).
 *
 * This header includes the stream protocols' headers, for the code that uses them all. */
#ifndef BRAID_WIRE_H
#define BRAID_WIRE_H

#include "wire/frame.h"
#include "wire/handle.h"
#include "wire/hello.h"

#endif
