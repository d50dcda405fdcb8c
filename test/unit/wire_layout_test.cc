// The exact bytes of every wire record (net_plugin/wire/): one golden byte string per record,
// written from the layout each header documents, so an accidental change of what goes on the wire
// fails here.  The verbs records (wire/verbs.h) were C structs sent as they lay in memory before:
// their golden bytes are what an x86-64 build sent then.  Round trips and rejections of the
// verbs records are here too; those of the stream records are in wire_test.cc.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <cctype>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

extern "C" {
#include "wire/ofi.h"
#include "wire/verbs.h"
#include "wire/wire.h"
}

namespace {

// "4252 4431 | 02" -> {0x42, 0x52, 0x44, 0x31, 0x02}: hex digits, anything else ignored.
std::vector<uint8_t> Bytes(const char *hex) {
  std::vector<uint8_t> v;
  int hi = -1;
  for (const char *p = hex; *p; p++) {
    if (!isxdigit((unsigned char)*p)) continue;
    int d = isdigit((unsigned char)*p) ? *p - '0' : tolower((unsigned char)*p) - 'a' + 10;
    if (hi < 0) {
      hi = d;
    } else {
      v.push_back((uint8_t)(hi << 4 | d));
      hi = -1;
    }
  }
  EXPECT_EQ(-1, hi) << "odd number of hex digits in " << hex;
  return v;
}

// n zero bytes, as hex.
std::string Zeros(int n) { return std::string((size_t)n * 2, '0'); }

// A run of n bytes from `first`, each one more than the last, as hex.
std::string Seq(int first, int n) {
  std::string s;
  char b[3];
  for (int i = 0; i < n; i++) {
    snprintf(b, sizeof b, "%02x", (first + i) & 0xff);
    s += b;
  }
  return s;
}

void ExpectBytes(const std::vector<uint8_t> &want, const uint8_t *got, size_t n) {
  ASSERT_EQ(want.size(), n) << "encoded length";
  for (size_t i = 0; i < n; i++) EXPECT_EQ(want[i], got[i]) << "byte " << i;
}

// ---------------------------------------------------------------------------------------------
// wire/handle.h, wire/hello.h, wire/frame.h

TEST(WireLayout, Handle) {
  braid_handle h;
  memset(&h, 0, sizeof h);
  auto *s = reinterpret_cast<sockaddr_in *>(&h.addr);
  s->sin_family = AF_INET;
  s->sin_port = htons(0x1234);
  s->sin_addr.s_addr = htonl(0x0a010203);
  for (int i = 0; i < BRAID_SECRET_BYTES; i++) h.secret[i] = (uint8_t)i;
  h.listen_id = 0x0102030405060708ull;
  h.tuner_fp = 0x1112131415161718ull;
  h.transport = BRAID_HANDLE_OFI | BRAID_HANDLE_FORCED;
  h.auth_caps = BRAID_CAPS_MAC;
  uint8_t buf[BRAID_HANDLE_BYTES];
  memset(buf, 0xa5, sizeof buf);
  braid_handle_encode(&h, buf);
  std::string want = "42524431 04 04 1234 0a010203" + Zeros(12) + Seq(0, 16) +
                     "0807060504030201 1817161514131211 03 01" + Zeros(128 - 58);
  ExpectBytes(Bytes(want.c_str()), buf, sizeof buf);

  memset(&h.addr, 0, sizeof h.addr);
  auto *s6 = reinterpret_cast<sockaddr_in6 *>(&h.addr);
  s6->sin6_family = AF_INET6;
  s6->sin6_port = htons(0xfffe);
  for (int i = 0; i < 16; i++) s6->sin6_addr.s6_addr[i] = (uint8_t)(0x20 + i);
  h.transport = BRAID_HANDLE_VERBS;
  h.auth_caps = BRAID_CAPS_MAC | BRAID_CAPS_REQUIRED;
  braid_handle_encode(&h, buf);
  want = "42524431 04 06 fffe" + Seq(0x20, 16) + Seq(0, 16) + "0807060504030201 1817161514131211 04 03" +
         Zeros(128 - 58);
  ExpectBytes(Bytes(want.c_str()), buf, sizeof buf);
}

TEST(WireLayout, Challenge) {
  braid_challenge c;
  for (int i = 0; i < BRAID_NONCE_BYTES; i++) c.nonce[i] = (uint8_t)(0x80 + i);
  uint8_t buf[BRAID_CHALLENGE_BYTES];
  braid_challenge_encode(&c, buf);
  ExpectBytes(Bytes(("42524443 0400 0000" + Seq(0x80, 16)).c_str()), buf, sizeof buf);
}

TEST(WireLayout, Hello) {
  braid_hello h;
  memset(&h, 0, sizeof h);
  h.stream = 3;
  h.per_rail = 2;
  h.nrails = 4;
  h.nbackup = 1;
  h.flags = BRAID_HELLO_REJOIN | BRAID_HELLO_VERBS;
  h.conn_id = 0x1122334455667788ull;
  h.auth = BRAID_AUTH_MAC;
  h.caps = BRAID_CAPS_MAC | BRAID_CAPS_REQUIRED;
  for (int i = 0; i < BRAID_NONCE_BYTES; i++) h.nonce[i] = (uint8_t)(0xa0 + i);
  for (int i = 0; i < BRAID_PROOF_BYTES; i++) h.proof[i] = (uint8_t)(0xc0 + i);
  uint8_t buf[BRAID_HELLO_BYTES];
  braid_hello_encode(&h, buf);
  std::string want = "42524448 0400 0300 0200 0400 0100 0500 8877665544332211 02 03" + Zeros(6) +
                     Seq(0xa0, 16) + Seq(0xc0, 32);
  ExpectBytes(Bytes(want.c_str()), buf, sizeof buf);

  // A set-up hello with the connection's traffic class and service level: bytes 26 and 27.
  h.flags = BRAID_HELLO_VERBS | BRAID_HELLO_TC | BRAID_HELLO_SL;
  h.tc = 0x68;
  h.sl = 3;
  braid_hello_encode(&h, buf);
  want = "42524448 0400 0300 0200 0400 0100 1c00 8877665544332211 02 03 68 03" + Zeros(4) +
         Seq(0xa0, 16) + Seq(0xc0, 32);
  ExpectBytes(Bytes(want.c_str()), buf, sizeof buf);
}

TEST(WireLayout, Reply) {
  braid_reply r;
  r.status = BRAID_REPLY_PROOF;
  for (int i = 0; i < BRAID_PROOF_BYTES; i++) r.proof[i] = (uint8_t)(0x40 + i);
  uint8_t buf[BRAID_REPLY_BYTES];
  braid_reply_encode(&r, buf);
  ExpectBytes(Bytes(("42524441 0400 0200" + Seq(0x40, 32)).c_str()), buf, sizeof buf);
}

TEST(WireLayout, RailList) {
  braid_raillist l;
  memset(&l, 0, sizeof l);
  l.nrails = 2;
  l.nbackup = 1;
  const uint32_t ip[2] = {0x0a000001, 0xc0a80002};
  for (int r = 0; r < 2; r++) {
    auto *s = reinterpret_cast<sockaddr_in *>(&l.addr[r]);
    s->sin_family = AF_INET;
    s->sin_port = htons((uint16_t)(8080 + r));
    s->sin_addr.s_addr = htonl(ip[r]);
  }
  uint8_t buf[BRAID_RAILLIST_BYTES(BRAID_RAILLIST_MAX)];
  size_t n = braid_raillist_encode(&l, buf);
  std::string want = "42524452 04 04 02 01 1f90 0a000001" + Zeros(12) + "1f91 c0a80002" + Zeros(12);
  ExpectBytes(Bytes(want.c_str()), buf, n);

  l.nrails = 1;
  l.nbackup = 0;
  memset(&l.addr[0], 0, sizeof l.addr[0]);
  auto *s6 = reinterpret_cast<sockaddr_in6 *>(&l.addr[0]);
  s6->sin6_family = AF_INET6;
  s6->sin6_port = htons(1);
  for (int i = 0; i < 16; i++) s6->sin6_addr.s6_addr[i] = (uint8_t)(0xf0 + i);
  n = braid_raillist_encode(&l, buf);
  ExpectBytes(Bytes(("42524452 04 06 01 00 0001" + Seq(0xf0, 16)).c_str()), buf, n);
}

TEST(WireLayout, Frame) {
  braid_frame f;
  memset(&f, 0, sizeof f);
  f.type = BRAID_FRAME_DATA;
  f.flags = 0x5a;
  f.len = 0x1000;
  f.seq = 0x0102030405060708ull;
  f.offset = 0x2000;
  f.size = 0x10000;
  f.tag = -2;
  uint8_t buf[BRAID_FRAME_HDR_BYTES];
  braid_frame_encode(&f, buf);
  ExpectBytes(Bytes("adb7 01 5a 00100000 0807060504030201 0020000000000000 0000010000000000 "
                    "feffffff 16414b43"),
              buf, sizeof buf);

  memset(&f, 0, sizeof f);
  f.type = BRAID_FRAME_ACK;
  f.seq = 7;
  f.offset = 5;
  braid_frame_encode(&f, buf);
  ExpectBytes(Bytes("adb7 02 00 00000000 0700000000000000 0500000000000000 0000000000000000 "
                    "00000000 61e0ee7b"),
              buf, sizeof buf);

  memset(&f, 0, sizeof f);
  f.type = BRAID_FRAME_CREDIT;
  f.seq = 0x0102030405060708ull;
  braid_frame_encode(&f, buf);
  ExpectBytes(Bytes("adb7 03 00 00000000 0807060504030201 0000000000000000 0000000000000000 "
                    "00000000 bd148531"),
              buf, sizeof buf);
}


// ---------------------------------------------------------------------------------------------
// wire/verbs.h: control messages

std::vector<uint8_t> Encode(const braid_vctl &m) {
  uint8_t buf[BRAID_VCTL_MAX_BYTES + 8];
  memset(buf, 0xa5, sizeof buf);
  size_t n = braid_vctl_encode(&m, buf);
  for (size_t i = n; i < sizeof buf; i++) EXPECT_EQ(0xa5, buf[i]) << "encode wrote past its length";
  return std::vector<uint8_t>(buf, buf + n);
}

// Decodes bytes, expecting success, and checks that they re-encode to exactly the same bytes.
braid_vctl Decode(const std::vector<uint8_t> &b) {
  braid_vctl m;
  char err[160] = "";
  EXPECT_EQ(0, braid_vctl_decode(b.data(), b.size(), &m, err, sizeof err)) << err;
  EXPECT_EQ(b, Encode(m)) << "the decoder ignored a byte";
  return m;
}

std::string DecodeError(const std::vector<uint8_t> &b) {
  braid_vctl m;
  char err[160] = "";
  EXPECT_EQ(-1, braid_vctl_decode(b.data(), b.size(), &m, err, sizeof err));
  EXPECT_NE('\0', err[0]) << "rejected without a reason";
  return err;
}

braid_vctl Cts() {
  braid_vctl m;
  memset(&m, 0, sizeof m);
  m.type = BRAID_VCTL_CTS;
  m.cts.slot = 5;
  m.cts.nrails = 2;
  m.cts.seq = 0x0a0b0c0d;  // % 8 == 5
  m.cts.addr = 0x1122334455667788ull;
  m.cts.cap = 0x100000;
  m.cts.rkey[0] = 0xdeadbeef;
  m.cts.rkey[1] = 0x01020304;
  return m;
}

braid_vctl Area() {
  braid_vctl m;
  memset(&m, 0, sizeof m);
  m.type = BRAID_VCTL_AREA;
  m.area.nrails = 3;
  m.area.addr = 0x7f0000001000ull;
  m.area.len = 0x10000;
  for (int r = 0; r < 3; r++) m.area.rkey[r] = (uint32_t)(r + 1);
  return m;
}

braid_vctl Fenced() {
  braid_vctl m;
  memset(&m, 0, sizeof m);
  m.type = BRAID_VCTL_FENCED;
  m.fenced.rail = 1;
  m.fenced.open = 0x05;
  m.fenced.fin = 0x01;
  m.fenced.posted = 0xff;
  for (int k = 0; k < BRAID_VWIRE_SLOTS; k++) m.fenced.seq[k] = (uint32_t)(0x100 + k);
  return m;
}

TEST(WireLayout, VerbsControlMessages) {
  EXPECT_EQ(Bytes(("01 05 02 00 0d0c0b0a 8877665544332211 0000100000000000 efbeadde 04030201" +
                   Zeros(24)).c_str()),
            Encode(Cts()));

  braid_vctl m;
  memset(&m, 0, sizeof m);
  m.type = BRAID_VCTL_FENCE;
  m.fence.rail = 3;
  m.fence.gen = 7;
  EXPECT_EQ(Bytes("02 03 07 00"), Encode(m));

  EXPECT_EQ(Bytes("03 01 0500 0100 ff00 00010000 01010000 02010000 03010000 04010000 05010000 "
                  "06010000 07010000"),
            Encode(Fenced()));

  memset(&m, 0, sizeof m);
  m.type = BRAID_VCTL_FIN;
  m.fin.seq = 0x12345678;
  EXPECT_EQ(Bytes("04 000000 78563412"), Encode(m));

  EXPECT_EQ(Bytes(("05 03 000000000000 00100000007f0000 0000010000000000 01000000 02000000 03000000" +
                   Zeros(20)).c_str()),
            Encode(Area()));

  memset(&m, 0, sizeof m);
  m.type = BRAID_VCTL_MISMATCH;
  m.mismatch.seq = 9;
  m.mismatch.size = 0x200000;
  m.mismatch.cap = 0x1000;
  EXPECT_EQ(Bytes("06 000000 09000000 0000200000000000 0010000000000000"), Encode(m));

  // REJOIN, REJOIN_ACK (joined, not now), JOINED: the address record as the link message's.
  const char *addr = "563412 00 010000 00 0000 02 03 00000000000000000000ffff0a580102";
  memset(&m, 0, sizeof m);
  m.type = BRAID_VCTL_REJOIN;
  m.rejoin.rail = 2;
  m.rejoin.gen = 5;
  m.rejoin.addr.qpn = 0x123456;
  m.rejoin.addr.psn = 1;
  m.rejoin.addr.link = BRAID_VADDR_LINK_ETH;
  m.rejoin.addr.mtu = 3;
  const uint8_t gid[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0x58, 1, 2};
  memcpy(m.rejoin.addr.gid, gid, 16);
  EXPECT_EQ(Bytes((std::string("07 02 05 00 ") + addr).c_str()), Encode(m));
  braid_vctl back = Decode(Encode(m));
  EXPECT_EQ(0, memcmp(&m.rejoin.addr, &back.rejoin.addr, sizeof m.rejoin.addr));
  m.type = BRAID_VCTL_REJOIN_ACK;
  m.rejoin.fenced = 2;
  EXPECT_EQ(Bytes((std::string("08 02 05 00 02000000 ") + addr + " 00000000").c_str()), Encode(m));
  m.rejoin.status = BRAID_VREJOIN_NOT_NOW;
  EXPECT_EQ(Bytes(("08 02 05 01 02000000" + Zeros(32)).c_str()), Encode(m));
  m.type = BRAID_VCTL_JOINED;
  EXPECT_EQ(Bytes("09 02 05 00"), Encode(m));

  memset(&m, 0, sizeof m);
  m.type = 10;
  EXPECT_TRUE(Encode(m).empty()) << "an unknown type encodes to nothing";
}

TEST(WireVerbs, ControlMessagesRoundTrip) {
  const braid_vctl cts = Cts(), area = Area(), fenced = Fenced();
  braid_vctl m = Decode(Encode(cts));
  EXPECT_EQ(BRAID_VCTL_CTS, m.type);
  EXPECT_EQ(5, m.cts.slot);
  EXPECT_EQ(2, m.cts.nrails);
  EXPECT_EQ(0x0a0b0c0du, m.cts.seq);
  EXPECT_EQ(0x1122334455667788ull, m.cts.addr);
  EXPECT_EQ(0x100000u, m.cts.cap);
  EXPECT_EQ(0xdeadbeefu, m.cts.rkey[0]);
  EXPECT_EQ(0x01020304u, m.cts.rkey[1]);

  m = Decode(Encode(area));
  EXPECT_EQ(3, m.area.nrails);
  EXPECT_EQ(0x7f0000001000ull, m.area.addr);
  EXPECT_EQ(0x10000u, m.area.len);
  EXPECT_EQ(3u, m.area.rkey[2]);

  m = Decode(Encode(fenced));
  EXPECT_EQ(1, m.fenced.rail);
  EXPECT_EQ(0x05, m.fenced.open);
  EXPECT_EQ(0x01, m.fenced.fin);
  EXPECT_EQ(0xff, m.fenced.posted);
  EXPECT_EQ(0x107u, m.fenced.seq[7]);

  // Every rail count and slot, and extreme values.
  for (int nr = 1; nr <= BRAID_VWIRE_RAILS; nr++) {
    for (uint32_t seq : {0u, 7u, 8u, 0x7fffffffu, 0xffffffffu}) {
      braid_vctl c;
      memset(&c, 0, sizeof c);
      c.type = BRAID_VCTL_CTS;
      c.cts.nrails = (uint8_t)nr;
      c.cts.seq = seq;
      c.cts.slot = (uint8_t)(seq % BRAID_VWIRE_SLOTS);
      c.cts.addr = ~0ull;
      c.cts.cap = ~0ull;
      for (int r = 0; r < nr; r++) c.cts.rkey[r] = ~0u - (uint32_t)r;
      m = Decode(Encode(c));
      EXPECT_EQ(0, memcmp(&m.cts.rkey, &c.cts.rkey, sizeof c.cts.rkey));
      EXPECT_EQ(seq, m.cts.seq);
    }
  }
  for (uint8_t rail = 0; rail < BRAID_VWIRE_RAILS; rail++) {
    braid_vctl f;
    memset(&f, 0, sizeof f);
    f.type = BRAID_VCTL_FENCE;
    f.fence.rail = rail;
    f.fence.gen = (uint8_t)(255 - rail);
    EXPECT_EQ(rail, Decode(Encode(f)).fence.rail);
    EXPECT_EQ(255 - rail, Decode(Encode(f)).fence.gen);
  }
  braid_vctl mm;
  memset(&mm, 0, sizeof mm);
  mm.type = BRAID_VCTL_MISMATCH;
  mm.mismatch.seq = ~0u;
  mm.mismatch.size = 1ull << 40;
  mm.mismatch.cap = 1;
  m = Decode(Encode(mm));
  EXPECT_EQ(~0u, m.mismatch.seq);
  EXPECT_EQ(1ull << 40, m.mismatch.size);
  EXPECT_EQ(1u, m.mismatch.cap);
}

TEST(WireVerbs, ControlMessagesRejected) {
  EXPECT_NE(std::string::npos, DecodeError({}).find("empty"));
  EXPECT_NE(std::string::npos, DecodeError({0}).find("unknown type 0"));
  EXPECT_NE(std::string::npos, DecodeError({10, 0}).find("unknown type 10"));

  // Each type has exactly one length.
  std::vector<uint8_t> b = Encode(Cts());
  b.push_back(0);
  EXPECT_NE(std::string::npos, DecodeError(b).find("CTS of 57 bytes"));
  b.resize(BRAID_VCTL_FENCE_BYTES);
  EXPECT_NE(std::string::npos, DecodeError(b).find("CTS of 4 bytes"));
  EXPECT_NE(std::string::npos, DecodeError({2, 0, 0}).find("FENCE of 3 bytes"));
  EXPECT_NE(std::string::npos, DecodeError({9, 0}).find("JOINED of 2 bytes"));
  EXPECT_NE(std::string::npos, DecodeError({4, 0, 0, 0}).find("FIN of 4 bytes"));

  // CTS: a reserved byte, a rail count out of range, a key past the rail count, a slot that is
  // not the sequence number's.
  b = Encode(Cts());
  b[3] = 1;
  EXPECT_NE(std::string::npos, DecodeError(b).find("reserved"));
  for (uint8_t nr : {0, 9, 255}) {
    b = Encode(Cts());
    b[2] = nr;
    EXPECT_NE(std::string::npos, DecodeError(b).find("rails (1 to 8)")) << (int)nr;
  }
  b = Encode(Cts());
  b[24 + 4 * 2] = 1;  // rkey[2] of a 2-rail CTS
  EXPECT_NE(std::string::npos, DecodeError(b).find("key for rail 2"));
  b = Encode(Cts());
  b[1] = 4;
  EXPECT_NE(std::string::npos, DecodeError(b).find("slot 4"));

  // FENCE / FENCED: a rail index beyond the wire's; FENCED: a slot bit beyond 8.
  EXPECT_NE(std::string::npos, DecodeError({2, 8, 0, 0}).find("FENCE of rail 8"));
  EXPECT_NE(std::string::npos, DecodeError({2, 1, 0, 1}).find("reserved"));

  // REJOIN, REJOIN_ACK, JOINED: a rail beyond the wire's, a bad address, a reserved byte, an
  // unknown status, a "not now" that carries an address.
  EXPECT_NE(std::string::npos, DecodeError({9, 8, 0, 0}).find("JOINED of rail 8"));
  EXPECT_NE(std::string::npos, DecodeError({9, 0, 0, 1}).find("reserved"));
  std::vector<uint8_t> rj(BRAID_VCTL_REJOIN_BYTES, 0);
  rj[0] = BRAID_VCTL_REJOIN;
  EXPECT_NE(std::string::npos, DecodeError(rj).find("REJOIN: unknown link layer 0"));
  std::vector<uint8_t> ack(BRAID_VCTL_REJOIN_ACK_BYTES, 0);
  ack[0] = BRAID_VCTL_REJOIN_ACK;
  ack[3] = 2;
  EXPECT_NE(std::string::npos, DecodeError(ack).find("status 2"));
  ack[3] = BRAID_VREJOIN_NOT_NOW;
  braid_vctl ok;
  char why[160];
  EXPECT_EQ(0, braid_vctl_decode(ack.data(), ack.size(), &ok, why, sizeof why)) << why;
  ack[20] = 1;
  EXPECT_NE(std::string::npos, DecodeError(ack).find("not now) with an address"));
  ack[20] = 0;
  ack[38] = 1;
  EXPECT_NE(std::string::npos, DecodeError(ack).find("reserved"));
  b = Encode(Fenced());
  b[1] = 200;
  EXPECT_NE(std::string::npos, DecodeError(b).find("FENCED of rail 200"));
  for (int off : {3, 5, 7}) {  // the high byte of open, fin, posted
    b = Encode(Fenced());
    b[off] = 0x01;
    EXPECT_NE(std::string::npos, DecodeError(b).find("slots beyond 7")) << off;
  }

  // FIN, MISMATCH, AREA: reserved bytes; AREA: rail counts and keys as CTS.
  for (int off = 1; off < 4; off++) {
    std::vector<uint8_t> fin = {4, 0, 0, 0, 0, 0, 0, 0};
    fin[off] = 0x10;
    EXPECT_NE(std::string::npos, DecodeError(fin).find("reserved")) << off;
  }
  braid_vctl mm;
  memset(&mm, 0, sizeof mm);
  mm.type = BRAID_VCTL_MISMATCH;
  b = Encode(mm);
  b[2] = 0x80;
  EXPECT_NE(std::string::npos, DecodeError(b).find("reserved"));
  for (int off = 2; off < 8; off++) {
    b = Encode(Area());
    b[off] = 1;
    EXPECT_NE(std::string::npos, DecodeError(b).find("reserved")) << off;
  }
  b = Encode(Area());
  b[1] = 0;
  EXPECT_NE(std::string::npos, DecodeError(b).find("AREA for 0 rails"));
  b = Encode(Area());
  b[24 + 4 * 7] = 1;
  EXPECT_NE(std::string::npos, DecodeError(b).find("key for rail 7"));
}

TEST(WireVerbs, ControlMessageNames) {
  EXPECT_STREQ("CTS", braid_vctl_name(BRAID_VCTL_CTS));
  EXPECT_STREQ("MISMATCH", braid_vctl_name(BRAID_VCTL_MISMATCH));
  EXPECT_STREQ("unknown", braid_vctl_name(0));
  EXPECT_STREQ("REJOIN_ACK", braid_vctl_name(BRAID_VCTL_REJOIN_ACK));
  EXPECT_STREQ("unknown", braid_vctl_name(10));
}

// ---------------------------------------------------------------------------------------------
// wire/verbs.h: the immediate

TEST(WireLayout, VerbsImmediate) {
  braid_vimm w = {false, 3, 5, 2};
  EXPECT_EQ(0x30010002u, braid_vimm_encode(&w));
  w = {false, 7, BRAID_VWIRE_MAX_CHUNKS, BRAID_VWIRE_MAX_CHUNKS - 1};
  EXPECT_EQ(0x7fffffffu, braid_vimm_encode(&w));
  w = {false, 0, 1, 0};
  EXPECT_EQ(0u, braid_vimm_encode(&w));
  w = {true, 0, 0, 0};
  EXPECT_EQ(0xf0000000u, braid_vimm_encode(&w));
}

TEST(WireVerbs, ImmediateRoundTripAndRejects) {
  char err[96];
  braid_vimm w;
  for (uint8_t slot = 0; slot < BRAID_VWIRE_SLOTS; slot++) {
    for (uint32_t nch : {1u, 2u, 100u, (uint32_t)BRAID_VWIRE_MAX_CHUNKS}) {
      for (uint32_t idx : {0u, nch / 2, nch - 1}) {
        braid_vimm in = {false, slot, nch, idx};
        uint32_t imm = braid_vimm_encode(&in);
        ASSERT_EQ(0, braid_vimm_decode(imm, &w, err, sizeof err)) << err;
        EXPECT_FALSE(w.probe);
        EXPECT_EQ(slot, w.slot);
        EXPECT_EQ(nch, w.nch);
        EXPECT_EQ(idx, w.idx);
      }
    }
  }
  ASSERT_EQ(0, braid_vimm_decode(0xf0000000u, &w, err, sizeof err));
  EXPECT_TRUE(w.probe);

  err[0] = 0;
  EXPECT_EQ(-1, braid_vimm_decode(0xf0000001u, &w, err, sizeof err));
  EXPECT_NE(nullptr, strstr(err, "probe"));
  EXPECT_EQ(-1, braid_vimm_decode(0x80000000u, &w, err, sizeof err));  // slot 8
  EXPECT_NE(nullptr, strstr(err, "slot 8"));
  EXPECT_EQ(-1, braid_vimm_decode(0xe0000000u, &w, err, sizeof err));  // slot 14
  EXPECT_EQ(0, braid_vimm_decode(0x10004001u, &w, err, sizeof err));   // slot 1, chunk 1 of 2
  EXPECT_EQ(-1, braid_vimm_decode(0x10004002u, &w, err, sizeof err));  // chunk 2 of 2
  EXPECT_NE(nullptr, strstr(err, "chunk 2 of 2"));
  EXPECT_EQ(-1, braid_vimm_decode(0x00003fffu, &w, err, sizeof err));  // chunk 16383 of 1
}

// ---------------------------------------------------------------------------------------------
// wire/verbs.h: the link message

std::vector<braid_verbs_ep_addr> Addrs(int n) {
  std::vector<braid_verbs_ep_addr> a((size_t)n);
  for (int r = 0; r < n; r++) {
    memset(&a[r], 0, sizeof a[r]);
    a[r].qpn = 0x123u + (uint32_t)r;
    a[r].psn = r ? 0x123456u : 0xabcdefu;
    a[r].lid = (uint16_t)(r ? 7 : 0);
    a[r].link = r ? BRAID_VADDR_LINK_IB : BRAID_VADDR_LINK_ETH;
    a[r].mtu = (uint8_t)(r ? 5 : 3);
    for (int i = 0; i < 16; i++) a[r].gid[i] = (uint8_t)(0xa0 + 16 * r + i);
  }
  return a;
}

std::vector<uint8_t> EncodeLink(const std::vector<braid_verbs_ep_addr> &a) {
  uint8_t buf[BRAID_VLINK_MAX_BYTES + 8];
  memset(buf, 0xa5, sizeof buf);
  size_t n = braid_vlink_encode(a.data(), (int)a.size(), buf);
  EXPECT_EQ((size_t)BRAID_VLINK_BYTES(a.size()), n);
  for (size_t i = n; i < sizeof buf; i++) EXPECT_EQ(0xa5, buf[i]) << "encode wrote past its length";
  return std::vector<uint8_t>(buf, buf + n);
}

std::string LinkError(const std::vector<uint8_t> &b) {
  braid_verbs_ep_addr out[BRAID_VWIRE_RAILS];
  char err[160] = "";
  EXPECT_EQ(-1, braid_vlink_decode(b.data(), b.size(), out, err, sizeof err));
  EXPECT_NE('\0', err[0]) << "rejected without a reason";
  return err;
}

TEST(WireLayout, VerbsLinkMessage) {
  std::string want = "42525641 02000000 "
                     "23010000 efcdab00 0000 02 03" + Seq(0xa0, 16) +
                     "24010000 56341200 0700 01 05" + Seq(0xb0, 16);
  EXPECT_EQ(Bytes(want.c_str()), EncodeLink(Addrs(2)));
}

TEST(WireVerbs, LinkMessageRoundTripAndRejects) {
  for (int n = 1; n <= BRAID_VWIRE_RAILS; n++) {
    std::vector<braid_verbs_ep_addr> a = Addrs(n);
    std::vector<uint8_t> b = EncodeLink(a);
    char err[160] = "";
    EXPECT_EQ(n, braid_vlink_rails(b.data(), err, sizeof err)) << err;
    braid_verbs_ep_addr out[BRAID_VWIRE_RAILS];
    ASSERT_EQ(n, braid_vlink_decode(b.data(), b.size(), out, err, sizeof err)) << err;
    for (int r = 0; r < n; r++) {
      EXPECT_EQ(a[r].qpn, out[r].qpn);
      EXPECT_EQ(a[r].psn, out[r].psn);
      EXPECT_EQ(a[r].lid, out[r].lid);
      EXPECT_EQ(a[r].link, out[r].link);
      EXPECT_EQ(a[r].mtu, out[r].mtu);
      EXPECT_EQ(0, memcmp(a[r].gid, out[r].gid, 16));
    }
  }
  std::vector<uint8_t> good = EncodeLink(Addrs(2)), b;
  b = good;
  b[0] ^= 1;
  EXPECT_NE(std::string::npos, LinkError(b).find("magic"));
  for (uint8_t n : {0, 9}) {
    b = good;
    b[4] = n;
    EXPECT_NE(std::string::npos, LinkError(b).find("rails (1 to 8)")) << (int)n;
  }
  b = good;
  b.pop_back();
  EXPECT_NE(std::string::npos, LinkError(b).find("bytes for 2 rails"));
  b = good;
  b.push_back(0);
  EXPECT_NE(std::string::npos, LinkError(b).find("bytes for 2 rails"));
  b.assign(good.begin(), good.begin() + 7);
  EXPECT_NE(std::string::npos, LinkError(b).find("7 bytes"));
  const int rec1 = BRAID_VLINK_BYTES(1);
  b = good;
  b[rec1 + 10] = 3;  // link
  EXPECT_NE(std::string::npos, LinkError(b).find("rail 1: unknown link layer 3"));
  for (uint8_t mtu : {0, 6}) {
    b = good;
    b[rec1 + 11] = mtu;
    EXPECT_NE(std::string::npos, LinkError(b).find("unknown MTU code")) << (int)mtu;
  }
  b = good;
  b[rec1 + 3] = 1;  // qpn bit 24
  EXPECT_NE(std::string::npos, LinkError(b).find("24 bits"));
  b = good;
  b[rec1 + 7] = 0x80;  // psn bit 31
  EXPECT_NE(std::string::npos, LinkError(b).find("24 bits"));
}

// ---------------------------------------------------------------------------------------------
// wire/ofi.h: the endpoint-address message

TEST(WireLayout, OfiEndpointAddress) {
  const uint8_t name[5] = {0x02, 0x00, 0x1f, 0x90, 0x7f};
  uint8_t buf[BRAID_OFI_NAME_MSG_MAX + 4];
  memset(buf, 0xa5, sizeof buf);
  size_t n = braid_ofi_name_encode(name, sizeof name, buf);
  ExpectBytes(Bytes("0500 02001f907f"), buf, n);
  EXPECT_EQ(0xa5, buf[n]);

  std::vector<uint8_t> big(BRAID_OFI_NAME_MAX);
  for (size_t i = 0; i < big.size(); i++) big[i] = (uint8_t)i;
  n = braid_ofi_name_encode(big.data(), big.size(), buf);
  ASSERT_EQ((size_t)BRAID_OFI_NAME_MSG_MAX, n);
  EXPECT_EQ(0x00, buf[0]);
  EXPECT_EQ(0x01, buf[1]);  // 256, little-endian
  EXPECT_EQ(0, memcmp(buf + 2, big.data(), big.size()));
}

TEST(WireOfi, EndpointAddressRoundTripAndRejects) {
  uint8_t buf[BRAID_OFI_NAME_MSG_MAX + 4];
  char err[160];
  for (size_t len : {(size_t)1, (size_t)16, (size_t)BRAID_OFI_NAME_MAX}) {
    std::vector<uint8_t> name(len);
    for (size_t i = 0; i < len; i++) name[i] = (uint8_t)(0xc3 ^ i);
    size_t n = braid_ofi_name_encode(name.data(), len, buf);
    ASSERT_EQ(len + BRAID_OFI_NAME_HDR_BYTES, n);
    err[0] = 0;
    EXPECT_EQ((int)n, braid_ofi_name_len(buf, err, sizeof err)) << err;
    const uint8_t *got = nullptr;
    ASSERT_EQ((int)len, braid_ofi_name_decode(buf, n, &got, err, sizeof err)) << err;
    EXPECT_EQ(buf + BRAID_OFI_NAME_HDR_BYTES, got);
    EXPECT_EQ(0, memcmp(got, name.data(), len));
    // A message cut short or with bytes beyond its address.
    err[0] = 0;
    EXPECT_EQ(-1, braid_ofi_name_decode(buf, n - 1, &got, err, sizeof err));
    EXPECT_NE(nullptr, strstr(err, "endpoint-address message of"));
    EXPECT_EQ(-1, braid_ofi_name_decode(buf, n + 1, &got, err, sizeof err));
  }
  // Nothing to encode: an empty address, one too long.
  EXPECT_EQ(0u, braid_ofi_name_encode(buf, 0, buf + 8));
  std::vector<uint8_t> big(BRAID_OFI_NAME_MAX + 1);
  EXPECT_EQ(0u, braid_ofi_name_encode(big.data(), big.size(), buf));

  const uint8_t empty[2] = {0, 0}, huge[2] = {0x01, 0x01} /* 257 */, max16[2] = {0xff, 0xff};
  err[0] = 0;
  EXPECT_EQ(-1, braid_ofi_name_len(empty, err, sizeof err));
  EXPECT_STREQ("an empty endpoint address", err);
  EXPECT_EQ(-1, braid_ofi_name_len(huge, err, sizeof err));
  EXPECT_STREQ("an endpoint address of 257 bytes (at most 256)", err);
  EXPECT_EQ(-1, braid_ofi_name_len(max16, err, sizeof err));
  const uint8_t *got;
  EXPECT_EQ(-1, braid_ofi_name_decode(empty, 1, &got, err, sizeof err));
  EXPECT_EQ(-1, braid_ofi_name_decode(empty, 2, &got, err, sizeof err));
  EXPECT_STREQ("an empty endpoint address", err);
}

}  // namespace
