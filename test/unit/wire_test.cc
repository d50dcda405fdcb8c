// Wire formats: the NCCL listen handle, the stream handshake (challenge, hello, reply) and the
// frame header.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

extern "C" {
#include "wire/wire.h"
}

namespace {

braid_handle MakeHandle4(const char *ip, uint16_t port, uint8_t secret_seed, uint64_t id) {
  braid_handle h;
  memset(&h, 0, sizeof h);
  auto *s = reinterpret_cast<sockaddr_in *>(&h.addr);
  s->sin_family = AF_INET;
  s->sin_port = htons(port);
  EXPECT_EQ(1, inet_pton(AF_INET, ip, &s->sin_addr));
  for (int i = 0; i < BRAID_SECRET_BYTES; i++) h.secret[i] = (uint8_t)(secret_seed + 17 * i);
  h.listen_id = id;
  return h;
}

braid_handle MakeHandle6(const char *ip, uint16_t port, uint8_t secret_seed, uint64_t id) {
  braid_handle h;
  memset(&h, 0, sizeof h);
  auto *s = reinterpret_cast<sockaddr_in6 *>(&h.addr);
  s->sin6_family = AF_INET6;
  s->sin6_port = htons(port);
  EXPECT_EQ(1, inet_pton(AF_INET6, ip, &s->sin6_addr));
  for (int i = 0; i < BRAID_SECRET_BYTES; i++) h.secret[i] = (uint8_t)(secret_seed ^ (31 * i));
  h.listen_id = id;
  return h;
}

// Decodes buf, expecting failure, and returns the message.
std::string HandleDecodeError(const uint8_t *buf) {
  braid_handle h;
  char err[256];
  memset(err, 0, sizeof err);
  EXPECT_EQ(-1, braid_handle_decode(buf, &h, err, sizeof err));
  EXPECT_NE('\0', err[0]) << "decode failed without a reason";
  return err;
}

// ---------------------------------------------------------------------------------------------
// Handle

TEST(WireHandle, RoundTripIPv4) {
  braid_handle in = MakeHandle4("10.1.2.3", 43210, 0x5a, 0x0123456789abcdefull);
  uint8_t buf[BRAID_HANDLE_BYTES];
  braid_handle_encode(&in, buf);

  braid_handle out;
  memset(&out, 0xee, sizeof out);
  char err[128] = "";
  ASSERT_EQ(0, braid_handle_decode(buf, &out, err, sizeof err)) << err;
  ASSERT_EQ(AF_INET, out.addr.ss_family);
  auto *a = reinterpret_cast<const sockaddr_in *>(&in.addr);
  auto *b = reinterpret_cast<const sockaddr_in *>(&out.addr);
  EXPECT_EQ(43210, ntohs(b->sin_port));
  EXPECT_EQ(a->sin_addr.s_addr, b->sin_addr.s_addr);
  EXPECT_EQ(0, memcmp(in.secret, out.secret, BRAID_SECRET_BYTES));
  EXPECT_EQ(0x0123456789abcdefull, out.listen_id);
}

TEST(WireHandle, RoundTripIPv6) {
  braid_handle in = MakeHandle6("2001:db8::1234:5678", 65535, 0xc3, ~0ull);
  uint8_t buf[BRAID_HANDLE_BYTES];
  braid_handle_encode(&in, buf);

  braid_handle out;
  memset(&out, 0xee, sizeof out);
  char err[128] = "";
  ASSERT_EQ(0, braid_handle_decode(buf, &out, err, sizeof err)) << err;
  ASSERT_EQ(AF_INET6, out.addr.ss_family);
  auto *a = reinterpret_cast<const sockaddr_in6 *>(&in.addr);
  auto *b = reinterpret_cast<const sockaddr_in6 *>(&out.addr);
  EXPECT_EQ(65535, ntohs(b->sin6_port));
  EXPECT_EQ(0, memcmp(&a->sin6_addr, &b->sin6_addr, sizeof a->sin6_addr));
  EXPECT_EQ(0, memcmp(in.secret, out.secret, BRAID_SECRET_BYTES));
  EXPECT_EQ(~0ull, out.listen_id);
}

TEST(WireHandle, DistinctHandlesEncodeDistinctly) {
  // Every field must actually reach the wire: changing any one changes the encoding.
  const braid_handle base = MakeHandle4("192.168.0.1", 1000, 1, 7);
  uint8_t ref[BRAID_HANDLE_BYTES], buf[BRAID_HANDLE_BYTES];
  braid_handle_encode(&base, ref);

  braid_handle h = base;
  reinterpret_cast<sockaddr_in *>(&h.addr)->sin_port = htons(1001);
  braid_handle_encode(&h, buf);
  EXPECT_NE(0, memcmp(ref, buf, sizeof buf)) << "port";

  h = base;
  reinterpret_cast<sockaddr_in *>(&h.addr)->sin_addr.s_addr ^= htonl(1);
  braid_handle_encode(&h, buf);
  EXPECT_NE(0, memcmp(ref, buf, sizeof buf)) << "address";

  for (int i = 0; i < BRAID_SECRET_BYTES; i++) {
    h = base;
    h.secret[i] ^= 0x80;
    braid_handle_encode(&h, buf);
    EXPECT_NE(0, memcmp(ref, buf, sizeof buf)) << "secret byte " << i;
  }
  h = base;
  h.listen_id ^= 1ull << 63;
  braid_handle_encode(&h, buf);
  EXPECT_NE(0, memcmp(ref, buf, sizeof buf)) << "listen_id";
}

TEST(WireHandle, EncodeZeroesStageAreaAndStaysInBounds) {
  for (int fam : {AF_INET, AF_INET6}) {
    braid_handle h = fam == AF_INET ? MakeHandle4("127.0.0.1", 5, 9, 1) : MakeHandle6("::1", 5, 9, 1);
    uint8_t buf[BRAID_HANDLE_BYTES + 64];
    memset(buf, 0xa5, sizeof buf);
    braid_handle_encode(&h, buf);
    for (int i = BRAID_HANDLE_STAGE_OFF; i < BRAID_HANDLE_BYTES; i++)
      ASSERT_EQ(0, buf[i]) << "stage byte " << i << " not zeroed (family " << fam << ")";
    for (size_t i = BRAID_HANDLE_BYTES; i < sizeof buf; i++)
      ASSERT_EQ(0xa5, buf[i]) << "encode wrote past the 128-byte handle at " << i;
  }
}

TEST(WireHandle, DecodeIgnoresStageArea) {
  // The connector keeps private state in bytes 64..127; it must not disturb decoding.
  braid_handle in = MakeHandle4("10.0.0.9", 4242, 3, 99);
  uint8_t buf[BRAID_HANDLE_BYTES];
  braid_handle_encode(&in, buf);
  memset(buf + BRAID_HANDLE_STAGE_OFF, 0xff, BRAID_HANDLE_BYTES - BRAID_HANDLE_STAGE_OFF);
  braid_handle out;
  char err[128] = "";
  ASSERT_EQ(0, braid_handle_decode(buf, &out, err, sizeof err)) << err;
  EXPECT_EQ(4242, ntohs(reinterpret_cast<sockaddr_in *>(&out.addr)->sin_port));
  EXPECT_EQ(99u, out.listen_id);
}

TEST(WireHandle, DecodeRejectsBadMagic) {
  braid_handle in = MakeHandle4("10.0.0.1", 80, 0, 0);
  uint8_t buf[BRAID_HANDLE_BYTES];
  braid_handle_encode(&in, buf);
  for (int byte = 0; byte < 4; byte++) {
    uint8_t bad[BRAID_HANDLE_BYTES];
    memcpy(bad, buf, sizeof bad);
    bad[byte] ^= 0x01;
    EXPECT_NE(std::string::npos, HandleDecodeError(bad).find("magic")) << "byte " << byte;
  }
  uint8_t zero[BRAID_HANDLE_BYTES] = {};
  EXPECT_NE(std::string::npos, HandleDecodeError(zero).find("not a braid handle"));
}

TEST(WireHandle, DecodeRejectsWrongVersion) {
  braid_handle in = MakeHandle4("10.0.0.1", 80, 0, 0);
  uint8_t buf[BRAID_HANDLE_BYTES];
  braid_handle_encode(&in, buf);
  ASSERT_EQ(BRAID_WIRE_VERSION, buf[4]);
  for (int v : {0, BRAID_WIRE_VERSION + 1, 255}) {
    buf[4] = (uint8_t)v;
    EXPECT_NE(std::string::npos, HandleDecodeError(buf).find("version")) << v;
  }
}

TEST(WireHandle, DecodeRejectsPortZero) {
  for (int fam : {AF_INET, AF_INET6}) {
    braid_handle in = fam == AF_INET ? MakeHandle4("10.0.0.1", 0, 0, 0) : MakeHandle6("fd00::1", 0, 0, 0);
    uint8_t buf[BRAID_HANDLE_BYTES];
    braid_handle_encode(&in, buf);
    EXPECT_NE(std::string::npos, HandleDecodeError(buf).find("port 0")) << fam;
  }
}

TEST(WireHandle, DecodeRejectsUnknownFamily) {
  braid_handle in = MakeHandle4("10.0.0.1", 80, 0, 0);
  uint8_t buf[BRAID_HANDLE_BYTES];
  braid_handle_encode(&in, buf);
  for (int fam = 0; fam < 256; fam++) {
    if (fam == 4 || fam == 6) continue;
    buf[5] = (uint8_t)fam;
    EXPECT_NE(std::string::npos, HandleDecodeError(buf).find("family")) << fam;
  }
}

TEST(WireHandle, ErrorMessageRespectsBufferSize) {
  uint8_t zero[BRAID_HANDLE_BYTES] = {};
  braid_handle h;
  char err[8];
  memset(err, 'x', sizeof err);
  EXPECT_EQ(-1, braid_handle_decode(zero, &h, err, 4));
  EXPECT_EQ('\0', err[3]);
  EXPECT_EQ('x', err[4]);
}

// The listener's transport travels in the handle: each one alone decodes, two at once do not.
TEST(WireHandle, TransportBits) {
  const uint8_t ok[] = {0, BRAID_HANDLE_OFI, BRAID_HANDLE_VERBS, BRAID_HANDLE_OFI | BRAID_HANDLE_FORCED,
                        BRAID_HANDLE_VERBS | BRAID_HANDLE_FORCED};
  for (uint8_t t : ok) {
    braid_handle in = MakeHandle4("10.1.2.3", 4000, 1, 2);
    in.transport = t;
    uint8_t buf[BRAID_HANDLE_BYTES];
    braid_handle_encode(&in, buf);
    braid_handle out;
    char err[128] = "";
    ASSERT_EQ(0, braid_handle_decode(buf, &out, err, sizeof err)) << (int)t << ": " << err;
    EXPECT_EQ(t, out.transport);
  }
  const uint8_t bad[] = {BRAID_HANDLE_OFI | BRAID_HANDLE_VERBS, 8, 0x80};
  for (uint8_t t : bad) {
    braid_handle in = MakeHandle4("10.1.2.3", 4000, 1, 2);
    in.transport = t;
    uint8_t buf[BRAID_HANDLE_BYTES];
    braid_handle_encode(&in, buf);
    EXPECT_NE(std::string::npos, HandleDecodeError(buf).find("transport")) << (int)t;
  }
}

// ---------------------------------------------------------------------------------------------
// Hello

braid_hello MakeHello(uint16_t stream, uint16_t nstreams) {
  braid_hello h;
  memset(&h, 0, sizeof h);
  for (int i = 0; i < BRAID_NONCE_BYTES; i++) h.nonce[i] = (uint8_t)(0xf0 - 7 * i);
  for (int i = 0; i < BRAID_PROOF_BYTES; i++) h.proof[i] = (uint8_t)(0x11 + 3 * i);
  h.auth = BRAID_AUTH_MAC;
  h.caps = BRAID_CAPS_MAC;
  h.conn_id = 0xfeedfacecafebeefull;
  h.stream = stream;
  h.per_rail = nstreams;  // one rail: streams per rail == total streams
  h.nrails = 1;
  return h;
}

std::string HelloDecodeError(const uint8_t *buf) {
  braid_hello h;
  char err[256];
  memset(err, 0, sizeof err);
  EXPECT_EQ(-1, braid_hello_decode(buf, &h, err, sizeof err));
  EXPECT_NE('\0', err[0]) << "decode failed without a reason";
  return err;
}

TEST(WireHello, RoundTripEveryValidStreamCount) {
  for (int n = 1; n <= BRAID_MAX_STREAMS; n++) {
    for (int s = 0; s < n; s++) {
      braid_hello in = MakeHello((uint16_t)s, (uint16_t)n);
      in.conn_id += (uint64_t)(n * 100 + s);
      uint8_t buf[BRAID_HELLO_BYTES];
      braid_hello_encode(&in, buf);
      braid_hello out;
      memset(&out, 0, sizeof out);
      char err[128] = "";
      ASSERT_EQ(0, braid_hello_decode(buf, &out, err, sizeof err)) << s << "/" << n << ": " << err;
      EXPECT_EQ(in.stream, out.stream);
      EXPECT_EQ(in.per_rail, out.per_rail);
      EXPECT_EQ(in.nrails, out.nrails);
      EXPECT_EQ(in.conn_id, out.conn_id);
      EXPECT_EQ(in.auth, out.auth);
      EXPECT_EQ(in.caps, out.caps);
      EXPECT_EQ(0, memcmp(in.nonce, out.nonce, BRAID_NONCE_BYTES));
      EXPECT_EQ(0, memcmp(in.proof, out.proof, BRAID_PROOF_BYTES));
    }
  }
}

// A rejoin names the connection's shape: BRAID_NSTREAMS=4 on 8 rails is stream 0..31 of 4 per
// rail on 8 rails, and the largest shape (16 per rail on 16 rails) decodes too.
TEST(WireHello, ManyStreamsOnManyRails) {
  for (auto pr : {std::pair<int, int>{4, 8}, {16, 16}, {1, 16}}) {
    braid_hello in = MakeHello(0, (uint16_t)pr.first);
    in.nrails = (uint16_t)pr.second;
    in.flags = BRAID_HELLO_REJOIN;
    for (int st : {0, pr.first * pr.second - 1}) {
      in.stream = (uint16_t)st;
      uint8_t buf[BRAID_HELLO_BYTES];
      braid_hello_encode(&in, buf);
      braid_hello out;
      char err[128] = "";
      ASSERT_EQ(0, braid_hello_decode(buf, &out, err, sizeof err)) << err;
      EXPECT_EQ(out.stream, st);
      EXPECT_EQ(out.per_rail, pr.first);
      EXPECT_EQ(out.nrails, pr.second);
    }
  }
}

// The connection's traffic class (transport/tclass.h) travels in bytes 26 and 27, each under its
// flag; a byte without its flag is refused, and a hello without the flags has the default.
TEST(WireHello, TrafficClassUnderItsFlags) {
  struct Case {
    uint16_t flags;
    uint8_t tc, sl;
  } cases[] = {{BRAID_HELLO_TC | BRAID_HELLO_SL, 104, 3},
               {BRAID_HELLO_TC | BRAID_HELLO_SL | BRAID_HELLO_VERBS, 255, 255},
               {BRAID_HELLO_TC, 0, 0},  // class 0 set on purpose differs from none
               {BRAID_HELLO_SL, 0, 15},
               {0, 0, 0}};
  for (const Case &k : cases) {
    braid_hello in = MakeHello(0, 1);
    in.flags = k.flags, in.tc = k.tc, in.sl = k.sl;
    uint8_t buf[BRAID_HELLO_BYTES];
    braid_hello_encode(&in, buf);
    EXPECT_EQ(k.tc, buf[26]);
    EXPECT_EQ(k.sl, buf[27]);
    braid_hello out;
    memset(&out, 0xa5, sizeof out);
    char err[128] = "";
    ASSERT_EQ(0, braid_hello_decode(buf, &out, err, sizeof err)) << k.flags << ": " << err;
    EXPECT_EQ(k.flags, out.flags);
    EXPECT_EQ(k.tc, out.tc);
    EXPECT_EQ(k.sl, out.sl);
  }
  braid_hello in = MakeHello(0, 1);
  in.tc = 104, in.sl = 3;  // without the flags: not encoded
  uint8_t buf[BRAID_HELLO_BYTES];
  braid_hello_encode(&in, buf);
  EXPECT_EQ(0, buf[26]);
  EXPECT_EQ(0, buf[27]);
  for (int byte : {26, 27}) {
    braid_hello_encode(&in, buf);
    buf[byte] = 8;
    EXPECT_NE(std::string::npos, HelloDecodeError(buf).find("traffic class byte without its flag")) << byte;
  }
  in.flags = 32;  // the next flag is still unknown
  braid_hello_encode(&in, buf);
  EXPECT_NE(std::string::npos, HelloDecodeError(buf).find("unknown flags"));
}

TEST(WireHello, RejectsUnknownAuthentication) {
  braid_hello in = MakeHello(0, 1);
  uint8_t buf[BRAID_HELLO_BYTES];
  in.auth = BRAID_AUTH_MAC + 1;
  braid_hello_encode(&in, buf);
  EXPECT_NE(std::string::npos, HelloDecodeError(buf).find("authentication"));
  in = MakeHello(0, 1);
  in.caps = 4;
  braid_hello_encode(&in, buf);
  EXPECT_NE(std::string::npos, HelloDecodeError(buf).find("authentication"));
  in = MakeHello(0, 1);
  braid_hello_encode(&in, buf);
  buf[28] = 1;  // a reserved byte
  HelloDecodeError(buf);
}

TEST(WireChallenge, RoundTripAndRejects) {
  braid_challenge c, out;
  for (int i = 0; i < BRAID_NONCE_BYTES; i++) c.nonce[i] = (uint8_t)(i * 13 + 1);
  uint8_t buf[BRAID_CHALLENGE_BYTES];
  braid_challenge_encode(&c, buf);
  char err[128] = "";
  ASSERT_EQ(0, braid_challenge_decode(buf, &out, err, sizeof err)) << err;
  EXPECT_EQ(0, memcmp(c.nonce, out.nonce, sizeof c.nonce));
  for (int byte : {0, 4, 6}) {
    uint8_t bad[BRAID_CHALLENGE_BYTES];
    memcpy(bad, buf, sizeof bad);
    bad[byte] ^= 1;
    err[0] = 0;
    EXPECT_EQ(-1, braid_challenge_decode(bad, &out, err, sizeof err)) << byte;
    EXPECT_NE('\0', err[0]);
  }
}

TEST(WireReply, RoundTripAndRejects) {
  braid_reply r, out;
  for (int st = 0; st <= BRAID_REPLY_MAX; st++) {
    r.status = (uint16_t)st;
    for (int i = 0; i < BRAID_PROOF_BYTES; i++) r.proof[i] = (uint8_t)(i + st);
    uint8_t buf[BRAID_REPLY_BYTES];
    braid_reply_encode(&r, buf);
    char err[128] = "";
    ASSERT_EQ(0, braid_reply_decode(buf, &out, err, sizeof err)) << err;
    EXPECT_EQ(out.status, st);
    EXPECT_EQ(0, memcmp(r.proof, out.proof, sizeof r.proof));
  }
  r.status = BRAID_REPLY_MAX + 1;
  uint8_t buf[BRAID_REPLY_BYTES];
  braid_reply_encode(&r, buf);
  char err[128] = "";
  EXPECT_EQ(-1, braid_reply_decode(buf, &out, err, sizeof err));
  EXPECT_NE(std::string(err).find("status"), std::string::npos);
}

// The connector's transport travels in the hello's flags: ofi or verbs, never both.
TEST(WireHello, TransportFlags) {
  for (uint16_t f : {0, BRAID_HELLO_OFI, BRAID_HELLO_VERBS, BRAID_HELLO_REJOIN | BRAID_HELLO_VERBS}) {
    braid_hello in = MakeHello(0, 1);
    in.flags = f;
    uint8_t buf[BRAID_HELLO_BYTES];
    braid_hello_encode(&in, buf);
    braid_hello out;
    char err[128] = "";
    ASSERT_EQ(0, braid_hello_decode(buf, &out, err, sizeof err)) << f << ": " << err;
    EXPECT_EQ(f, out.flags);
  }
  for (uint16_t f : {BRAID_HELLO_OFI | BRAID_HELLO_VERBS, 32, 0x100}) {
    braid_hello in = MakeHello(0, 1);
    in.flags = f;
    uint8_t buf[BRAID_HELLO_BYTES];
    braid_hello_encode(&in, buf);
    EXPECT_NE(std::string::npos, HelloDecodeError(buf).find("flags")) << f;
  }
}

TEST(WireHello, EncodeStaysInBounds) {
  braid_hello in = MakeHello(0, 1);
  uint8_t buf[BRAID_HELLO_BYTES + 16];
  memset(buf, 0x5c, sizeof buf);
  braid_hello_encode(&in, buf);
  for (size_t i = BRAID_HELLO_BYTES; i < sizeof buf; i++) ASSERT_EQ(0x5c, buf[i]) << i;
}

TEST(WireHello, NonceProofAndConnIdReachTheWire) {
  braid_hello a = MakeHello(1, 2), b = a;
  uint8_t ba[BRAID_HELLO_BYTES], bb[BRAID_HELLO_BYTES];
  braid_hello_encode(&a, ba);
  for (int i = 0; i < BRAID_NONCE_BYTES; i++) {
    b = a;
    b.nonce[i] ^= 1;
    braid_hello_encode(&b, bb);
    EXPECT_NE(0, memcmp(ba, bb, sizeof ba)) << "nonce byte " << i;
  }
  for (int i = 0; i < BRAID_PROOF_BYTES; i++) {
    b = a;
    b.proof[i] ^= 1;
    braid_hello_encode(&b, bb);
    EXPECT_NE(0, memcmp(ba, bb, sizeof ba)) << "proof byte " << i;
  }
  b = a;
  b.conn_id ^= 1ull << 40;
  braid_hello_encode(&b, bb);
  EXPECT_NE(0, memcmp(ba, bb, sizeof ba));
}

TEST(WireHello, RejectsStreamNotBelowCount) {
  for (auto sn : {std::pair<int, int>{1, 1}, {2, 2}, {5, 4}, {16, 16}, {65535, 16}}) {
    braid_hello in = MakeHello((uint16_t)sn.first, (uint16_t)sn.second);
    uint8_t buf[BRAID_HELLO_BYTES];
    braid_hello_encode(&in, buf);
    EXPECT_NE(std::string::npos, HelloDecodeError(buf).find("stream"))
        << sn.first << "/" << sn.second;
  }
}

TEST(WireHello, RejectsStreamCountZeroOrTooMany) {
  for (int n : {0, BRAID_MAX_STREAMS + 1, 64, 65535}) {
    braid_hello in = MakeHello(0, (uint16_t)n);
    uint8_t buf[BRAID_HELLO_BYTES];
    braid_hello_encode(&in, buf);
    HelloDecodeError(buf);
  }
}

TEST(WireHello, RejectsBadMagicAndVersion) {
  braid_hello in = MakeHello(0, 4);
  uint8_t good[BRAID_HELLO_BYTES];
  braid_hello_encode(&in, good);
  for (int byte = 0; byte < 4; byte++) {
    for (int bit = 0; bit < 8; bit++) {
      uint8_t buf[BRAID_HELLO_BYTES];
      memcpy(buf, good, sizeof buf);
      buf[byte] ^= (uint8_t)(1 << bit);
      EXPECT_NE(std::string::npos, HelloDecodeError(buf).find("not a braid hello"))
          << byte << ":" << bit;
    }
  }
  uint8_t buf[BRAID_HELLO_BYTES];
  memcpy(buf, good, sizeof buf);
  buf[4] = BRAID_WIRE_VERSION + 1;
  EXPECT_NE(std::string::npos, HelloDecodeError(buf).find("version"));
  uint8_t zero[BRAID_HELLO_BYTES] = {};
  HelloDecodeError(zero);
}

// ---------------------------------------------------------------------------------------------
// Frame header

braid_frame MakeFrame(uint32_t len, uint64_t offset, uint64_t size) {
  braid_frame f;
  memset(&f, 0, sizeof f);
  f.type = BRAID_FRAME_DATA;
  f.flags = 0;
  f.len = len;
  f.seq = 12345;
  f.offset = offset;
  f.size = size;
  f.tag = 77;
  return f;
}

void ExpectFrameEq(const braid_frame &a, const braid_frame &b) {
  EXPECT_EQ(a.type, b.type);
  EXPECT_EQ(a.flags, b.flags);
  EXPECT_EQ(a.len, b.len);
  EXPECT_EQ(a.seq, b.seq);
  EXPECT_EQ(a.offset, b.offset);
  EXPECT_EQ(a.size, b.size);
  EXPECT_EQ(a.tag, b.tag);
}

bool FrameDecodes(const braid_frame &f, std::string *err_out = nullptr) {
  uint8_t buf[BRAID_FRAME_HDR_BYTES];
  braid_frame_encode(&f, buf);
  braid_frame out;
  char err[256] = "";
  int rc = braid_frame_decode(buf, &out, err, sizeof err);
  if (err_out) *err_out = err;
  return rc == 0;
}

std::vector<braid_frame> ValidFrames() {
  std::vector<braid_frame> v;
  v.push_back(MakeFrame(0, 0, 0));  // empty message
  v.push_back(MakeFrame(1, 0, 1));
  v.push_back(MakeFrame(4096, 8192, 1 << 20));
  v.push_back(MakeFrame(BRAID_FRAME_MAX_LEN, 0, BRAID_FRAME_MAX_LEN));
  v.push_back(MakeFrame(BRAID_FRAME_MAX_LEN, BRAID_MSG_MAX_BYTES - BRAID_FRAME_MAX_LEN,
                        BRAID_MSG_MAX_BYTES));
  braid_frame f = MakeFrame(524288, 524288, 3 * 524288);
  f.flags = 0xff;
  f.seq = ~0ull;
  f.tag = -1;
  v.push_back(f);
  f = MakeFrame(7, 0, 7);
  f.tag = INT32_MIN;
  f.seq = 0;
  v.push_back(f);
  f = MakeFrame(1000, 999000, 1000000);
  f.tag = INT32_MAX;
  f.flags = 0x5a;
  f.seq = 0x8000000000000001ull;
  v.push_back(f);
  return v;
}

TEST(WireFrame, RoundTrip) {
  for (const braid_frame &in : ValidFrames()) {
    uint8_t buf[BRAID_FRAME_HDR_BYTES + 8];
    memset(buf, 0x33, sizeof buf);
    braid_frame_encode(&in, buf);
    for (size_t i = BRAID_FRAME_HDR_BYTES; i < sizeof buf; i++) ASSERT_EQ(0x33, buf[i]);
    braid_frame out;
    memset(&out, 0, sizeof out);
    char err[256] = "";
    ASSERT_EQ(0, braid_frame_decode(buf, &out, err, sizeof err))
        << err << " (len " << in.len << " offset " << in.offset << " size " << in.size << ")";
    ExpectFrameEq(in, out);
  }
}

TEST(WireFrame, EverySingleBitFlipIsRejected) {
  // 40-byte header = 320 bits; magic, checksum or a consistency check must catch each flip.
  std::vector<braid_frame> frames = ValidFrames();
  std::mt19937_64 rng(20240601);
  for (int i = 0; i < 500; i++) {
    uint64_t size = rng() % (BRAID_MSG_MAX_BYTES + 1);
    uint64_t offset = size ? rng() % size : 0;
    uint64_t room = size - offset;
    uint32_t len = (uint32_t)(room < BRAID_FRAME_MAX_LEN ? room : BRAID_FRAME_MAX_LEN);
    if (len > 1) len = 1 + (uint32_t)(rng() % len);
    braid_frame f = MakeFrame(len, offset, size);
    f.seq = rng();
    f.tag = (int32_t)rng();
    f.flags = (uint8_t)rng();
    frames.push_back(f);
  }
  size_t checked = 0;
  for (const braid_frame &f : frames) {
    uint8_t good[BRAID_FRAME_HDR_BYTES];
    braid_frame_encode(&f, good);
    braid_frame out;
    char err[256];
    ASSERT_EQ(0, braid_frame_decode(good, &out, err, sizeof err)) << err;
    for (int bit = 0; bit < BRAID_FRAME_HDR_BYTES * 8; bit++) {
      uint8_t buf[BRAID_FRAME_HDR_BYTES];
      memcpy(buf, good, sizeof buf);
      buf[bit / 8] ^= (uint8_t)(1u << (bit % 8));
      err[0] = 0;
      ASSERT_EQ(-1, braid_frame_decode(buf, &out, err, sizeof err))
          << "flip of bit " << bit << " (byte " << bit / 8 << ") accepted; len " << f.len
          << " offset " << f.offset << " size " << f.size;
      ASSERT_NE('\0', err[0]);
      checked++;
    }
  }
  EXPECT_EQ(frames.size() * 320, checked);
}

TEST(WireFrame, RejectsLenBeyondMessageEnd) {
  std::string err;
  EXPECT_FALSE(FrameDecodes(MakeFrame(101, 0, 100), &err));
  EXPECT_NE(std::string::npos, err.find("inconsistent")) << err;
  EXPECT_FALSE(FrameDecodes(MakeFrame(2, 99, 100)));
  EXPECT_TRUE(FrameDecodes(MakeFrame(1, 99, 100)));
  EXPECT_FALSE(FrameDecodes(MakeFrame(1, 100, 100)));
  EXPECT_TRUE(FrameDecodes(MakeFrame(100, 0, 100)));
}

TEST(WireFrame, RejectsOffsetBeyondSize) {
  EXPECT_FALSE(FrameDecodes(MakeFrame(0, 1, 0)));
  EXPECT_FALSE(FrameDecodes(MakeFrame(1, 101, 100)));
  EXPECT_FALSE(FrameDecodes(MakeFrame(1, ~0ull, 100)));  // offset + len would wrap
  EXPECT_FALSE(FrameDecodes(MakeFrame(BRAID_FRAME_MAX_LEN, ~0ull - 10, BRAID_MSG_MAX_BYTES)));
}

TEST(WireFrame, RejectsSizeAboveOneGiB) {
  EXPECT_TRUE(FrameDecodes(MakeFrame(1, 0, BRAID_MSG_MAX_BYTES)));
  EXPECT_FALSE(FrameDecodes(MakeFrame(1, 0, BRAID_MSG_MAX_BYTES + 1)));
  EXPECT_FALSE(FrameDecodes(MakeFrame(1, BRAID_MSG_MAX_BYTES, BRAID_MSG_MAX_BYTES + 1)));
  EXPECT_FALSE(FrameDecodes(MakeFrame(1, 0, ~0ull)));
  EXPECT_EQ(1ull << 30, (unsigned long long)BRAID_MSG_MAX_BYTES);
}

TEST(WireFrame, RejectsLenAboveMaxChunk) {
  EXPECT_FALSE(FrameDecodes(MakeFrame(BRAID_FRAME_MAX_LEN + 1, 0, BRAID_MSG_MAX_BYTES)));
  EXPECT_FALSE(FrameDecodes(MakeFrame(UINT32_MAX, 0, BRAID_MSG_MAX_BYTES)));
}

TEST(WireFrame, RejectsEmptyChunkOfNonEmptyMessage) {
  EXPECT_TRUE(FrameDecodes(MakeFrame(0, 0, 0)));
  EXPECT_FALSE(FrameDecodes(MakeFrame(0, 0, 1)));
  EXPECT_FALSE(FrameDecodes(MakeFrame(0, 50, 100)));
  EXPECT_FALSE(FrameDecodes(MakeFrame(0, 100, 100)));
}

TEST(WireFrame, RejectsUnknownType) {
  for (int t = 0; t < 256; t++) {
    if (t == BRAID_FRAME_DATA || t == BRAID_FRAME_ACK || t == BRAID_FRAME_CREDIT) continue;
    braid_frame f = MakeFrame(10, 0, 10);
    f.type = (uint8_t)t;
    std::string err;
    EXPECT_FALSE(FrameDecodes(f, &err)) << t;
    EXPECT_NE(std::string::npos, err.find("type")) << t << ": " << err;
  }
}

TEST(WireFrame, AckFramesCarryACountAndTheHeldMark) {
  braid_frame f;
  memset(&f, 0, sizeof f);
  f.type = BRAID_FRAME_ACK;
  f.seq = 12345;
  f.offset = 678;  // every message below 678 is held by the receiver
  std::string err;
  EXPECT_TRUE(FrameDecodes(f, &err)) << err;
  uint8_t buf[BRAID_FRAME_HDR_BYTES];
  braid_frame_encode(&f, buf);
  braid_frame out;
  char why[128];
  ASSERT_EQ(braid_frame_decode(buf, &out, why, sizeof why), 0) << why;
  EXPECT_EQ(out.seq, 12345u);
  EXPECT_EQ(out.offset, 678u);
  f.len = 10, f.size = 10;
  EXPECT_FALSE(FrameDecodes(f, &err)) << "an ack with a payload is garbled";
  f.len = 0, f.size = 0, f.tag = 3;
  EXPECT_FALSE(FrameDecodes(f, &err)) << "an ack with a tag is garbled";
}

// ofi_rxm: the receiver grants the frames whose payload receives it has posted (a frame count).
TEST(WireFrame, CreditFramesCarryOnlyAFrameCount) {
  braid_frame f;
  memset(&f, 0, sizeof f);
  f.type = BRAID_FRAME_CREDIT;
  f.seq = 424242;
  std::string err;
  EXPECT_TRUE(FrameDecodes(f, &err)) << err;
  uint8_t buf[BRAID_FRAME_HDR_BYTES];
  braid_frame_encode(&f, buf);
  braid_frame out;
  char why[128];
  ASSERT_EQ(braid_frame_decode(buf, &out, why, sizeof why), 0) << why;
  EXPECT_EQ(out.type, BRAID_FRAME_CREDIT);
  EXPECT_EQ(out.seq, 424242u);
  for (int field = 0; field < 4; field++) {
    braid_frame g = f;
    if (field == 0) g.len = 1;
    if (field == 1) g.offset = 1;
    if (field == 2) g.size = 1;
    if (field == 3) g.tag = 1;
    EXPECT_FALSE(FrameDecodes(g, &err)) << "field " << field;
    EXPECT_NE(std::string::npos, err.find("credit")) << err;
  }
}

TEST(WireFrame, RejectsBadMagicWithMessage) {
  braid_frame f = MakeFrame(10, 0, 10);
  uint8_t buf[BRAID_FRAME_HDR_BYTES];
  braid_frame_encode(&f, buf);
  buf[0] ^= 0xff;
  braid_frame out;
  char err[256] = "";
  EXPECT_EQ(-1, braid_frame_decode(buf, &out, err, sizeof err));
  EXPECT_NE(nullptr, strstr(err, "magic")) << err;
  uint8_t zero[BRAID_FRAME_HDR_BYTES] = {};
  EXPECT_EQ(-1, braid_frame_decode(zero, &out, err, sizeof err));
}

}  // namespace
