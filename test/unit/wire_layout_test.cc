// The exact bytes of every wire record (net_plugin/wire/): one golden byte string per record,
// written from the layout each header documents, so an accidental change of what goes on the wire
// fails here.  Round trips and rejections of the older records are in wire_test.cc.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <cctype>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

extern "C" {
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
  std::string want = "42524431 02 04 1234 0a010203" + Zeros(12) + Seq(0, 16) +
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
  want = "42524431 02 06 fffe" + Seq(0x20, 16) + Seq(0, 16) + "0807060504030201 1817161514131211 04 03" +
         Zeros(128 - 58);
  ExpectBytes(Bytes(want.c_str()), buf, sizeof buf);
}

TEST(WireLayout, Challenge) {
  braid_challenge c;
  for (int i = 0; i < BRAID_NONCE_BYTES; i++) c.nonce[i] = (uint8_t)(0x80 + i);
  uint8_t buf[BRAID_CHALLENGE_BYTES];
  braid_challenge_encode(&c, buf);
  ExpectBytes(Bytes(("42524443 0200 0000" + Seq(0x80, 16)).c_str()), buf, sizeof buf);
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
  std::string want = "42524448 0200 0300 0200 0400 0100 0500 8877665544332211 02 03" + Zeros(6) +
                     Seq(0xa0, 16) + Seq(0xc0, 32);
  ExpectBytes(Bytes(want.c_str()), buf, sizeof buf);
}

TEST(WireLayout, Reply) {
  braid_reply r;
  r.status = BRAID_REPLY_PROOF;
  for (int i = 0; i < BRAID_PROOF_BYTES; i++) r.proof[i] = (uint8_t)(0x40 + i);
  uint8_t buf[BRAID_REPLY_BYTES];
  braid_reply_encode(&r, buf);
  ExpectBytes(Bytes(("42524441 0200 0200" + Seq(0x40, 32)).c_str()), buf, sizeof buf);
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
  std::string want = "42524452 02 04 02 01 1f90 0a000001" + Zeros(12) + "1f91 c0a80002" + Zeros(12);
  ExpectBytes(Bytes(want.c_str()), buf, n);

  l.nrails = 1;
  l.nbackup = 0;
  memset(&l.addr[0], 0, sizeof l.addr[0]);
  auto *s6 = reinterpret_cast<sockaddr_in6 *>(&l.addr[0]);
  s6->sin6_family = AF_INET6;
  s6->sin6_port = htons(1);
  for (int i = 0; i < 16; i++) s6->sin6_addr.s6_addr[i] = (uint8_t)(0xf0 + i);
  n = braid_raillist_encode(&l, buf);
  ExpectBytes(Bytes(("42524452 02 06 01 00 0001" + Seq(0xf0, 16)).c_str()), buf, n);
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
}

}  // namespace
