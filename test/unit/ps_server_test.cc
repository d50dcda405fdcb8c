// braid-ps in-process: raw-socket heads speak the protocol of proto.h / auth.h to a server on
// 127.0.0.1 (port 0): reductions in any arrival order, hold-back, refusals, failure isolation,
// timeouts, the authenticated handshake, frame tags (both directions: every frame a Head reads
// must carry the server's right tag), the cap on unauthenticated connections.  Every socket read has a timeout, so a server that hangs fails a test, never the run.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "flood.h"

extern "C" {
#include "assign.h"
#include "auth.h"
#include "proto.h"
#include "reduce.h"
#include "server.h"
}

namespace {

const char kToken[] = "test-token-0123456789abcdef";
constexpr int kFloat32 = 7, kInt32 = 2, kBf16 = 9, kSum = 0;

double Now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

struct Session {
  uint8_t id[PS_SESSION_BYTES];
};

Session NewSession() {
  static std::mt19937_64 rng(12345);
  Session s;
  for (auto &b : s.id) b = static_cast<uint8_t>(rng());
  return s;
}

class Server {
 public:
  explicit Server(ps_server_opts o = {}) {
    o.listen = "127.0.0.1:0";
    if (!o.token) o.token = kToken;
    if (!o.threads) o.threads = 3;
    char err[256] = "";
    s_ = ps_server_start(&o, err, sizeof err);
    EXPECT_NE(s_, nullptr) << err;
  }
  ~Server() {
    if (s_) ps_server_stop(s_);
  }
  int port() const { return ps_server_port(s_); }
  ps_server *get() { return s_; }
  // Waits until every partition buffer is freed.
  bool MemoryDrains(double secs = 2) {
    double end = Now() + secs;
    while (Now() < end) {
      if (ps_server_memory(s_) == 0) return true;
      usleep(2000);
    }
    return ps_server_memory(s_) == 0;
  }
  // Waits until the server holds n sessions: a handshake returns once its proof is sent, so a
  // test that needs the server to have joined it first (before a rival HELLO) waits here.
  bool WaitSessions(int n, double secs = 3) {
    double end = Now() + secs;
    while (Now() < end) {
      if (ps_server_sessions(s_) == n) return true;
      usleep(1000);
    }
    return false;
  }
  bool SessionsDrain(double secs = 2) {
    double end = Now() + secs;
    while (Now() < end) {
      if (ps_server_sessions(s_) == 0) return true;
      usleep(2000);
    }
    return false;
  }

 private:
  ps_server *s_ = nullptr;
};

struct Frame {
  ps_hdr h{};
  std::vector<uint8_t> payload;
  std::string Text() const {
    char t[PS_MAX_TEXT + 1];
    ps_text_decode(payload.data(), payload.size(), t, sizeof t);
    return t;
  }
};

// One CollNet head: a raw TCP connection.
class Head {
 public:
  explicit Head(int port) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(0, connect(fd_, reinterpret_cast<sockaddr *>(&a), sizeof a)) << strerror(errno);
    int one = 1;
    setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  ~Head() { Close(); }
  void Close() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }

  bool SendRaw(const void *p, size_t n) {
    const uint8_t *b = static_cast<const uint8_t *>(p);
    while (n) {
      ssize_t w = send(fd_, b, n, MSG_NOSIGNAL);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return false;
      b += w;
      n -= static_cast<size_t>(w);
    }
    return true;
  }
  // A whole frame; with frame authentication on, followed by its tag.
  bool Send(const ps_hdr &h, const void *payload = nullptr) {
    uint8_t raw[PS_HDR_BYTES];
    ps_hdr_encode(&h, raw);
    if (!SendRaw(raw, sizeof raw) || (h.len && !SendRaw(payload, h.len))) return false;
    return !auth_ || SendTag(raw, payload, h.len);
  }
  // The tag of a frame sent raw (header and payload already written), numbered next.
  bool SendTag(const uint8_t raw[PS_HDR_BYTES], const void *payload, size_t len) {
    uint8_t tag[PS_TAG_BYTES];
    ps_mac_frame(key_, PS_DIR_HEAD, tx_seq_++, raw, payload, len, tag);
    return SendRaw(tag, sizeof tag);
  }
  // A whole tagged frame as bytes (to replay or corrupt), numbered next.
  std::vector<uint8_t> Sealed(const ps_hdr &h, const void *payload) {
    std::vector<uint8_t> v(PS_HDR_BYTES + h.len + PS_TAG_BYTES);
    ps_hdr_encode(&h, v.data());
    if (h.len) memcpy(v.data() + PS_HDR_BYTES, payload, h.len);
    ps_mac_frame(key_, PS_DIR_HEAD, tx_seq_++, v.data(), payload, h.len, v.data() + PS_HDR_BYTES + h.len);
    return v;
  }

  // Reads exactly n bytes within the deadline; false on timeout, EOF or error.
  bool ReadFull(void *p, size_t n, double deadline) {
    uint8_t *b = static_cast<uint8_t *>(p);
    while (n) {
      int ms = static_cast<int>((deadline - Now()) * 1000);
      if (ms < 0) return false;
      pollfd pf{fd_, POLLIN, 0};
      int r = poll(&pf, 1, ms);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return false;
      ssize_t got = recv(fd_, b, n, 0);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) {
        eof_ = true;
        return false;
      }
      received_.insert(received_.end(), b, b + got);
      b += got;
      n -= static_cast<size_t>(got);
    }
    return true;
  }
  // One frame; with frame authentication its tag is read and must be right.
  bool Read(Frame *f, double secs = 3) {
    double deadline = Now() + secs;
    uint8_t raw[PS_HDR_BYTES];
    if (!ReadFull(raw, sizeof raw, deadline)) return false;
    char err[128];
    if (ps_hdr_decode(raw, &f->h, err, sizeof err) != 0) {
      ADD_FAILURE() << "server sent a bad header: " << err;
      return false;
    }
    f->payload.resize(f->h.len);
    if (f->h.len && !ReadFull(f->payload.data(), f->h.len, deadline)) return false;
    if (!rx_auth_) return true;
    uint8_t tag[PS_TAG_BYTES], want[PS_TAG_BYTES];
    if (!ReadFull(tag, sizeof tag, deadline)) return false;
    ps_mac_frame(key_, PS_DIR_SERVER, rx_seq_++, raw, f->payload.data(), f->h.len, want);
    if (!ps_auth_equal_tag(tag, want)) {
      ADD_FAILURE() << "the server's " << ps_type_name(f->h.type) << " frame has a wrong tag";
      return false;
    }
    return true;
  }
  // Reads frames until end-of-stream; true if the server closed within secs.  The last ERROR
  // or REFUSE text seen is kept in last_text().
  bool WaitClosed(double secs = 3) {
    double deadline = Now() + secs;
    while (Now() < deadline) {
      Frame f;
      if (Read(&f, deadline - Now())) {
        if (f.h.type == PS_ERROR || f.h.type == PS_REFUSE) last_text_ = f.Text();
        continue;
      }
      return eof_;
    }
    return false;
  }
  // Nothing arrives within secs (and the connection stays open).
  bool Quiet(double secs) {
    pollfd pf{fd_, POLLIN, 0};
    return poll(&pf, 1, static_cast<int>(secs * 1000)) == 0;
  }

  // HELLO, CHALLENGE {nonce}, AUTH (our proof first), PROOF (the server's, checked); from
  // there on, with auth, frames are tagged both ways.  False if the server refused or its proof
  // did not verify.
  bool Handshake(const Session &s, uint32_t rank, uint32_t nranks, bool hold,
                 const char *token = kToken, uint32_t version = PS_VERSION, bool auth = true) {
    ps_hello hello{};
    hello.version = version;
    memcpy(hello.session, s.id, sizeof s.id);
    hello.rank = rank;
    hello.nranks = nranks;
    ps_auth_random(hello.nonce, sizeof hello.nonce);
    ps_transcript t{};
    ps_hello_encode(&hello, t.hello);
    t.flags = static_cast<uint8_t>((hold ? PS_FLAG_HOLD : 0) | (auth ? PS_FLAG_AUTH : 0));
    ps_hdr h{};
    h.type = PS_HELLO;
    h.flags = t.flags;
    h.len = PS_HELLO_BYTES;
    if (!Send(h, t.hello)) return false;
    Frame ch;
    if (!Read(&ch)) return false;
    if (ch.h.type != PS_CHALLENGE) {
      if (ch.h.type == PS_REFUSE) last_text_ = ch.Text();
      return false;
    }
    EXPECT_EQ(ch.payload.size(), static_cast<size_t>(PS_NONCE_BYTES)) << "CHALLENGE is a nonce only";
    memcpy(t.server_nonce, ch.payload.data(), PS_NONCE_BYTES);
    uint8_t proof[PS_PROOF_BYTES];
    ps_auth_head_proof(token, &t, proof);
    ps_hdr a{};
    a.type = PS_AUTH;
    a.len = PS_AUTH_BYTES;
    if (!Send(a, proof)) return false;
    Frame pf;
    if (!Read(&pf)) return false;
    if (pf.h.type != PS_PROOF) {
      if (pf.h.type == PS_REFUSE) last_text_ = pf.Text();
      return false;
    }
    uint8_t want[PS_PROOF_BYTES];
    ps_auth_server_proof(token, &t, want);
    if (!ps_auth_equal(want, pf.payload.data())) return false;
    if (auth) {
      ps_auth_conn_key(token, &t, key_);
      auth_ = rx_auth_ = true;
    }
    return true;
  }
  bool ExpectReady() {
    Frame f;
    if (!Read(&f)) return false;
    if (f.h.type == PS_REFUSE || f.h.type == PS_ERROR) last_text_ = f.Text();
    return f.h.type == PS_READY;
  }

  bool Push(uint64_t seq, uint32_t part, uint32_t rank, int dtype, int op,
            const std::vector<uint8_t> &data, uint8_t weight_seed = 0) {
    return Send(PushHdr(seq, part, rank, dtype, op, data.size(), weight_seed), data.data());
  }
  static ps_hdr PushHdr(uint64_t seq, uint32_t part, uint32_t rank, int dtype, int op, size_t len,
                        uint8_t weight_seed = 0) {
    ps_hdr h{};
    h.type = PS_PUSH;
    h.seq = seq;
    h.part = part;
    h.rank = rank;
    h.dtype = static_cast<uint8_t>(dtype);
    h.op = static_cast<uint8_t>(op);
    h.len = static_cast<uint32_t>(len);
    for (int i = 0; i < PS_MAX_SERVERS; i++) h.weights[i] = static_cast<uint8_t>(weight_seed + i);
    return h;
  }
  bool Done(uint64_t seq, uint32_t part) {
    ps_hdr h{};
    h.type = PS_DONE;
    h.seq = seq;
    h.part = part;
    return Send(h);
  }

  bool Gone(uint64_t seq, uint32_t part) {
    ps_hdr h{};
    h.type = PS_GONE;
    h.seq = seq;
    h.part = part;
    return Send(h);
  }

  const std::string &last_text() const { return last_text_; }
  const std::vector<uint8_t> &received() const { return received_; }
  int fd() const { return fd_; }

 private:
  int fd_ = -1;
  bool eof_ = false;
  std::string last_text_;
  std::vector<uint8_t> received_;
  bool auth_ = false, rx_auth_ = false;
  uint8_t key_[PS_KEY_BYTES] = {};
  uint64_t tx_seq_ = 0, rx_seq_ = 0;
};

using Heads = std::vector<std::unique_ptr<Head>>;

// n heads joined to session s and READY.
Heads JoinAll(Server &srv, const Session &s, uint32_t n, bool hold, bool auth = true) {
  Heads heads;
  for (uint32_t r = 0; r < n; r++) {
    heads.emplace_back(new Head(srv.port()));
    EXPECT_TRUE(heads.back()->Handshake(s, r, n, hold, kToken, PS_VERSION, auth)) << "rank " << r;
  }
  for (uint32_t r = 0; r < n; r++) EXPECT_TRUE(heads[r]->ExpectReady()) << "rank " << r << ": " << heads[r]->last_text();
  return heads;
}

std::vector<uint8_t> RandomInput(int dtype, size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v;
  if (dtype == kFloat32) {
    std::uniform_real_distribution<float> d(-1000.f, 1000.f);
    v.resize(count * 4);
    for (size_t i = 0; i < count; i++) {
      float x = d(rng);
      memcpy(&v[i * 4], &x, 4);
    }
  } else if (dtype == kInt32) {
    v.resize(count * 4);
    for (size_t i = 0; i < count; i++) {
      uint32_t x = rng();
      memcpy(&v[i * 4], &x, 4);
    }
  } else {  // bf16
    std::uniform_real_distribution<float> d(-100.f, 100.f);
    v.resize(count * 2);
    for (size_t i = 0; i < count; i++) {
      uint16_t x = braid_f32_to_bf16(d(rng));
      memcpy(&v[i * 2], &x, 2);
    }
  }
  return v;
}

// The sum in rank order, computed here from the semantics in reduce.h.
std::vector<uint8_t> Expected(int dtype, const std::vector<std::vector<uint8_t>> &in) {
  std::vector<uint8_t> out(in[0].size());
  size_t esz = dtype == kBf16 ? 2 : 4;
  for (size_t i = 0; i < out.size() / esz; i++) {
    if (dtype == kFloat32) {
      float acc;
      memcpy(&acc, &in[0][i * 4], 4);
      for (size_t r = 1; r < in.size(); r++) {
        float x;
        memcpy(&x, &in[r][i * 4], 4);
        acc = acc + x;
      }
      memcpy(&out[i * 4], &acc, 4);
    } else if (dtype == kInt32) {
      uint32_t acc = 0;
      for (auto &b : in) {
        uint32_t x;
        memcpy(&x, &b[i * 4], 4);
        acc += x;
      }
      memcpy(&out[i * 4], &acc, 4);
    } else {
      float acc = 0;
      for (size_t r = 0; r < in.size(); r++) {
        uint16_t x;
        memcpy(&x, &in[r][i * 2], 2);
        acc = r ? acc + braid_bf16_to_f32(x) : braid_bf16_to_f32(x);
      }
      uint16_t o = braid_f32_to_bf16(acc);
      memcpy(&out[i * 2], &o, 2);
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Reductions

// Pushes of three heads arrive in every order (whole, or interleaved mid-payload); each head gets
// the same RESULT, equal to the rank-order sum, bitwise identical whatever the order.
TEST(PsServerReduce, ThreeHeadsAnyArrivalOrder) {
  Server srv;
  Session s = NewSession();
  Heads heads = JoinAll(srv, s, 3, false);
  uint64_t seq = 0;
  for (int dtype : {kFloat32, kInt32, kBf16}) {
    size_t count = 12345;  // odd: the kernels' tails
    std::vector<std::vector<uint8_t>> in;
    for (uint32_t r = 0; r < 3; r++) in.push_back(RandomInput(dtype, count, 100 * dtype + r));
    std::vector<uint8_t> want = Expected(dtype, in);
    std::vector<uint8_t> first;
    int order[3] = {0, 1, 2};
    int perm = 0;
    do {
      // Even permutations: whole pushes with a pause between them; odd ones: the first head's
      // push is cut in two around the others.
      uint32_t part = static_cast<uint32_t>(perm % 2);
      if (perm % 2 == 0) {
        for (int r : order) {
          ASSERT_TRUE(heads[r]->Push(seq, part, r, dtype, kSum, in[r], static_cast<uint8_t>(r * 50)));
          usleep(3000);
        }
      } else {
        int a = order[0];
        ps_hdr h = Head::PushHdr(seq, part, a, dtype, kSum, in[a].size(), static_cast<uint8_t>(a * 50));
        uint8_t raw[PS_HDR_BYTES];
        ps_hdr_encode(&h, raw);
        size_t half = in[a].size() / 2 + 1;
        ASSERT_TRUE(heads[a]->SendRaw(raw, 20));
        usleep(2000);
        ASSERT_TRUE(heads[a]->SendRaw(raw + 20, sizeof raw - 20));
        ASSERT_TRUE(heads[a]->SendRaw(in[a].data(), half));
        for (int k = 1; k < 3; k++)
          ASSERT_TRUE(heads[order[k]]->Push(seq, part, order[k], dtype, kSum, in[order[k]],
                                            static_cast<uint8_t>(order[k] * 50)));
        usleep(3000);
        ASSERT_TRUE(heads[a]->SendRaw(in[a].data() + half, in[a].size() - half));
        ASSERT_TRUE(heads[a]->SendTag(raw, in[a].data(), in[a].size()));
      }
      for (uint32_t r = 0; r < 3; r++) {
        Frame f;
        ASSERT_TRUE(heads[r]->Read(&f)) << "rank " << r;
        ASSERT_EQ(f.h.type, PS_RESULT) << f.Text();
        EXPECT_EQ(f.h.seq, seq);
        EXPECT_EQ(f.h.part, part);
        EXPECT_EQ(f.h.dtype, dtype);
        EXPECT_EQ(f.h.op, kSum);
        for (int i = 0; i < PS_MAX_SERVERS; i++) EXPECT_EQ(f.h.weights[i], i) << "rank 0's weights";
        ASSERT_EQ(f.payload.size(), want.size());
        EXPECT_TRUE(f.payload == want) << "dtype " << dtype << " order " << order[0] << order[1] << order[2];
        if (first.empty()) first = f.payload;
        EXPECT_TRUE(f.payload == first) << "not bitwise identical across arrival orders";
      }
      seq++;
      perm++;
    } while (std::next_permutation(order, order + 3));
  }
  EXPECT_TRUE(srv.MemoryDrains()) << "partitions not freed without hold-back";
  EXPECT_EQ(1, ps_server_sessions(srv.get()));
}

// One op laid out over servers of unequal weights (ps_layout: partitions of different lengths
// within the op, as a slow server's smaller share gives), here all reduced by this one server:
// every element's sum is the rank-order sum, bitwise identical to the same op laid out evenly.
TEST(PsServerReduce, UnequalLayoutSameSumsBitwise) {
  Server srv;
  Session s = NewSession();
  Heads heads = JoinAll(srv, s, 3, false);
  for (int dtype : {kFloat32, kBf16}) {
    size_t esz = dtype == kBf16 ? 2 : 4, count = 300001;  // not a whole number of grains
    std::vector<std::vector<uint8_t>> in;
    for (uint32_t r = 0; r < 3; r++) in.push_back(RandomInput(dtype, count, 900 + dtype + r));
    const uint8_t uneven[4] = {255, 51, 255, 20}, even[4] = {1, 1, 1, 1};
    std::vector<std::vector<uint8_t>> got;
    uint64_t seq = static_cast<uint64_t>(dtype) * 10;
    for (const uint8_t *w : {uneven, even}) {
      uint32_t n = ps_layout(w, 4, seq, count * esz, esz, 64u << 10, nullptr, 0);
      std::vector<ps_piece> pc(n);
      ps_layout(w, 4, seq, count * esz, esz, 64u << 10, pc.data(), n);
      std::vector<uint8_t> out(count * esz, 0xAB);
      for (uint32_t r = 0; r < 3; r++)
        for (uint32_t p = 0; p < n; p++) {
          std::vector<uint8_t> part(in[r].begin() + pc[p].off, in[r].begin() + pc[p].off + pc[p].len);
          ASSERT_TRUE(heads[r]->Push(seq, p, r, dtype, kSum, part));
        }
      for (uint32_t r = 0; r < 3; r++)
        for (uint32_t k = 0; k < n; k++) {
          Frame f;
          ASSERT_TRUE(heads[r]->Read(&f));
          ASSERT_EQ(f.h.type, PS_RESULT) << f.Text();
          ASSERT_LT(f.h.part, n);
          ASSERT_EQ(f.payload.size(), pc[f.h.part].len);
          if (r == 0) memcpy(&out[pc[f.h.part].off], f.payload.data(), f.payload.size());
        }
      got.push_back(out);
      seq++;
    }
    EXPECT_TRUE(got[0] == Expected(dtype, in)) << "dtype " << dtype;
    EXPECT_TRUE(got[0] == got[1]) << "uneven and even layouts differ, dtype " << dtype;
  }
  EXPECT_TRUE(srv.MemoryDrains());
}

// Many partitions in flight at once, pushed by every head in its own order; without frame
// authentication (BRAID_PS_FRAME_AUTH=0: no tags either way).
TEST(PsServerReduce, ManyPartitionsInFlight) {
  Server srv;
  Session s = NewSession();
  Heads heads = JoinAll(srv, s, 3, false, /*auth=*/false);
  const int kParts = 40;
  std::vector<std::vector<std::vector<uint8_t>>> in(kParts);
  for (int p = 0; p < kParts; p++)
    for (uint32_t r = 0; r < 3; r++) in[p].push_back(RandomInput(kInt32, 1000 + p, p * 7 + r));
  for (uint32_t r = 0; r < 3; r++) {
    std::vector<int> order(kParts);
    for (int p = 0; p < kParts; p++) order[p] = p;
    std::shuffle(order.begin(), order.end(), std::mt19937(r));
    for (int p : order) ASSERT_TRUE(heads[r]->Push(7, p, r, kInt32, kSum, in[p][r]));
  }
  for (uint32_t r = 0; r < 3; r++) {
    std::vector<bool> seen(kParts);
    for (int k = 0; k < kParts; k++) {
      Frame f;
      ASSERT_TRUE(heads[r]->Read(&f));
      ASSERT_EQ(f.h.type, PS_RESULT) << f.Text();
      ASSERT_LT(f.h.part, static_cast<uint32_t>(kParts));
      EXPECT_FALSE(seen[f.h.part]);
      seen[f.h.part] = true;
      EXPECT_TRUE(f.payload == Expected(kInt32, in[f.h.part])) << "part " << f.h.part;
    }
  }
  EXPECT_TRUE(srv.MemoryDrains());
}

// Hold-back: RESULT, then RELEASE only once every head sent DONE; then the partition is freed.
TEST(PsServerHold, DoneThenRelease) {
  Server srv;
  Session s = NewSession();
  Heads heads = JoinAll(srv, s, 3, true);
  for (uint64_t seq = 0; seq < 3; seq++) {
    std::vector<std::vector<uint8_t>> in;
    for (uint32_t r = 0; r < 3; r++) {
      in.push_back(RandomInput(kFloat32, 4096, static_cast<uint32_t>(seq * 3 + r)));
      ASSERT_TRUE(heads[r]->Push(seq, 0, r, kFloat32, kSum, in[r]));
    }
    for (uint32_t r = 0; r < 3; r++) {
      Frame f;
      ASSERT_TRUE(heads[r]->Read(&f));
      ASSERT_EQ(f.h.type, PS_RESULT) << f.Text();
      EXPECT_TRUE(f.payload == Expected(kFloat32, in));
    }
    EXPECT_GT(ps_server_memory(srv.get()), 0u) << "held until RELEASE";
    ASSERT_TRUE(heads[2]->Done(seq, 0));
    ASSERT_TRUE(heads[0]->Done(seq, 0));
    for (uint32_t r = 0; r < 3; r++) EXPECT_TRUE(heads[r]->Quiet(0.02)) << "RELEASE before every DONE";
    ASSERT_TRUE(heads[1]->Done(seq, 0));
    for (uint32_t r = 0; r < 3; r++) {
      Frame f;
      ASSERT_TRUE(heads[r]->Read(&f));
      EXPECT_EQ(f.h.type, PS_RELEASE) << f.Text();
      EXPECT_EQ(f.h.seq, seq);
      EXPECT_EQ(f.h.part, 0u);
    }
    EXPECT_TRUE(srv.MemoryDrains());
  }
}

// A replacement server after a server died with its RELEASE half sent: head 0 completed the
// partition there (GONE), heads 1 and 2 re-send it.  They are released without a RESULT (they
// hold it already), whether their push came before or after the GONE, and nothing stays held.
TEST(PsServerHold, GoneReleasesHeadsThatResend) {
  Server srv;
  Session s = NewSession();
  Heads heads = JoinAll(srv, s, 3, true);
  std::vector<uint8_t> in = RandomInput(kFloat32, 4096, 7);
  ASSERT_TRUE(heads[1]->Push(9, 2, 1, kFloat32, kSum, in));  // before the GONE
  EXPECT_TRUE(heads[1]->Quiet(0.02)) << "waits for the other heads";
  ASSERT_TRUE(heads[0]->Gone(9, 2));
  Frame f;
  ASSERT_TRUE(heads[1]->Read(&f));
  EXPECT_EQ(f.h.type, PS_RELEASE) << f.Text();
  EXPECT_EQ(f.h.seq, 9u);
  EXPECT_EQ(f.h.part, 2u);
  ASSERT_TRUE(heads[2]->Push(9, 2, 2, kFloat32, kSum, in));  // after it
  ASSERT_TRUE(heads[2]->Read(&f));
  EXPECT_EQ(f.h.type, PS_RELEASE) << f.Text();
  EXPECT_TRUE(heads[0]->Quiet(0.02)) << "the head that sent GONE gets nothing";
  EXPECT_TRUE(srv.MemoryDrains());
  // A GONE from every head (all had completed it) is quiet too, and the session goes on.
  for (uint32_t r = 0; r < 3; r++) ASSERT_TRUE(heads[r]->Gone(11, 0));
  for (uint32_t r = 0; r < 3; r++) EXPECT_TRUE(heads[r]->Quiet(0.02));
  for (uint32_t r = 0; r < 3; r++) ASSERT_TRUE(heads[r]->Push(12, 0, r, kInt32, kSum, RandomInput(kInt32, 8, r)));
  for (uint32_t r = 0; r < 3; r++) {
    ASSERT_TRUE(heads[r]->Read(&f));
    EXPECT_EQ(f.h.type, PS_RESULT) << f.Text();
  }
}

// Without hold-back a DONE is out of place: the session is closed.
TEST(PsServerHold, DoneWithoutHoldClosesSession) {
  Server srv;
  Session s = NewSession();
  Heads heads = JoinAll(srv, s, 2, false);
  for (uint32_t r = 0; r < 2; r++) ASSERT_TRUE(heads[r]->Push(0, 0, r, kInt32, kSum, RandomInput(kInt32, 8, r)));
  for (uint32_t r = 0; r < 2; r++) {
    Frame f;
    ASSERT_TRUE(heads[r]->Read(&f));
    ASSERT_EQ(f.h.type, PS_RESULT);
  }
  ASSERT_TRUE(heads[0]->Done(0, 0));
  for (auto &h : heads) EXPECT_TRUE(h->WaitClosed());
  EXPECT_NE(heads[1]->last_text().find("without hold-back"), std::string::npos) << heads[1]->last_text();
}

// ---------------------------------------------------------------------------------------------
// Handshake

TEST(PsServerAuth, WrongTokenRefusedAndNeverSent) {
  Server srv;
  Session s = NewSession();
  Head h(srv.port());
  const char wrong[] = "not-the-token-at-all-000";
  EXPECT_FALSE(h.Handshake(s, 0, 1, false, wrong)) << "server proof verified with a wrong token";
  EXPECT_TRUE(h.WaitClosed());
  EXPECT_NE(h.last_text().find("authentication failed"), std::string::npos) << h.last_text();
  std::string got(h.received().begin(), h.received().end());
  EXPECT_EQ(got.find(kToken), std::string::npos);
  EXPECT_EQ(got.find(wrong), std::string::npos);
  // A correct head of the same session id is still welcome.
  Head ok(srv.port());
  ASSERT_TRUE(ok.Handshake(s, 0, 1, false));
  EXPECT_TRUE(ok.ExpectReady());
  std::string all(ok.received().begin(), ok.received().end());
  EXPECT_EQ(all.find(kToken), std::string::npos);
}

TEST(PsServerAuth, BadVersionRefused) {
  Server srv;
  Head h(srv.port());
  EXPECT_FALSE(h.Handshake(NewSession(), 0, 2, false, kToken, PS_VERSION + 1));
  EXPECT_TRUE(h.WaitClosed());
  EXPECT_NE(h.last_text().find("version"), std::string::npos) << h.last_text();
}

TEST(PsServerAuth, FrameOutOfPlaceRefused) {
  Server srv;
  Head h(srv.port());
  ps_hdr d{};
  d.type = PS_DONE;
  ASSERT_TRUE(h.Send(d));
  EXPECT_TRUE(h.WaitClosed());
  EXPECT_NE(h.last_text().find("expected HELLO"), std::string::npos) << h.last_text();
}

TEST(PsServerJoin, RankAlreadyTaken) {
  Server srv;
  Session s = NewSession();
  Head a(srv.port()), dup(srv.port()), b(srv.port());
  ASSERT_TRUE(a.Handshake(s, 0, 2, false));
  ASSERT_TRUE(srv.WaitSessions(1));  // a's join is in before dup's HELLO
  ASSERT_TRUE(dup.Handshake(s, 0, 2, false));
  EXPECT_TRUE(dup.WaitClosed());
  EXPECT_NE(dup.last_text().find("already joined"), std::string::npos) << dup.last_text();
  ASSERT_TRUE(b.Handshake(s, 1, 2, false));  // the session is unharmed
  EXPECT_TRUE(a.ExpectReady());
  EXPECT_TRUE(b.ExpectReady());
}

TEST(PsServerJoin, NranksOrHoldMismatchRefused) {
  Server srv;
  Session s = NewSession();
  Head a(srv.port()), wrong_n(srv.port()), wrong_hold(srv.port()), b(srv.port());
  ASSERT_TRUE(a.Handshake(s, 0, 2, true));
  ASSERT_TRUE(srv.WaitSessions(1));  // a's join defines the session before the rival HELLOs
  ASSERT_TRUE(wrong_n.Handshake(s, 1, 3, true));
  EXPECT_TRUE(wrong_n.WaitClosed());
  EXPECT_NE(wrong_n.last_text().find("ranks"), std::string::npos) << wrong_n.last_text();
  ASSERT_TRUE(wrong_hold.Handshake(s, 1, 2, false));
  EXPECT_TRUE(wrong_hold.WaitClosed());
  EXPECT_NE(wrong_hold.last_text().find("hold"), std::string::npos) << wrong_hold.last_text();
  ASSERT_TRUE(b.Handshake(s, 1, 2, true));
  EXPECT_TRUE(a.ExpectReady());
  EXPECT_TRUE(b.ExpectReady());
  // Complete: nobody else may join.
  Head late(srv.port());
  ASSERT_TRUE(late.Handshake(s, 1, 2, true));
  EXPECT_TRUE(late.WaitClosed());
  EXPECT_NE(late.last_text().find("complete"), std::string::npos) << late.last_text();
}

TEST(PsServerJoin, JoinAndHandshakeTimeouts) {
  ps_server_opts o{};
  o.join_timeout_s = 0.3;
  o.handshake_timeout_s = 0.3;
  Server srv(o);
  Session s = NewSession();
  Head a(srv.port()), b(srv.port()), silent(srv.port());
  double t0 = Now();
  ASSERT_TRUE(a.Handshake(s, 0, 3, false));
  ASSERT_TRUE(b.Handshake(s, 2, 3, false));
  EXPECT_TRUE(a.WaitClosed(2));
  EXPECT_TRUE(b.WaitClosed(2));
  EXPECT_NE(a.last_text().find("join timeout"), std::string::npos) << a.last_text();
  EXPECT_TRUE(silent.WaitClosed(2));
  EXPECT_LT(Now() - t0, 1.5);
  // The closed session cannot be rejoined.
  Head c(srv.port());
  ASSERT_TRUE(c.Handshake(s, 1, 3, false));
  EXPECT_TRUE(c.WaitClosed());
  EXPECT_NE(c.last_text().find("closed"), std::string::npos) << c.last_text();
  EXPECT_TRUE(srv.SessionsDrain());
}

// A stranger (no token) who connects gets a random nonce and a refusal: nothing computed from the
// token, so no offline guessing oracle for it (protocol 1 answered HELLO with a MAC over the
// stranger's nonce).
TEST(PsServerAuth, StrangerGetsNothingKeyedByTheToken) {
  Server srv;
  Head h(srv.port());
  ps_hello hello{};
  hello.version = PS_VERSION;
  hello.rank = 0;
  hello.nranks = 1;
  memset(hello.nonce, 0x42, sizeof hello.nonce);
  uint8_t hb[PS_HELLO_BYTES];
  ps_hello_encode(&hello, hb);
  ps_hdr hh{};
  hh.type = PS_HELLO;
  hh.len = PS_HELLO_BYTES;
  ASSERT_TRUE(h.Send(hh, hb));
  Frame ch;
  ASSERT_TRUE(h.Read(&ch));
  ASSERT_EQ(ch.h.type, PS_CHALLENGE);
  EXPECT_EQ(ch.payload.size(), static_cast<size_t>(PS_NONCE_BYTES)) << "CHALLENGE carries a proof";
  EXPECT_TRUE(h.Quiet(0.1)) << "more than a nonce before the head proved anything";
  uint8_t junk[PS_PROOF_BYTES];
  memset(junk, 0x17, sizeof junk);
  ps_hdr a{};
  a.type = PS_AUTH;
  a.len = PS_AUTH_BYTES;
  ASSERT_TRUE(h.Send(a, junk));
  EXPECT_TRUE(h.WaitClosed());
  EXPECT_NE(h.last_text().find("authentication failed"), std::string::npos) << h.last_text();
  // Everything received: the CHALLENGE and the REFUSE, no PROOF.
  EXPECT_EQ(h.received().size(), 2u * PS_HDR_BYTES + PS_NONCE_BYTES + h.last_text().size());
}

// A head of protocol 1 (before the head proved first) gets a refusal that names both versions.
TEST(PsServerAuth, OldProtocolRefusedClearly) {
  Server srv;
  Head h(srv.port());
  EXPECT_FALSE(h.Handshake(NewSession(), 0, 2, false, kToken, 1));
  EXPECT_TRUE(h.WaitClosed());
  EXPECT_NE(h.last_text().find("protocol version 1"), std::string::npos) << h.last_text();
  EXPECT_NE(h.last_text().find("speaks 2"), std::string::npos) << h.last_text();
}

// braid-ps --require-frame-auth refuses heads that do not tag their frames.
TEST(PsServerAuth, RequireFrameAuth) {
  ps_server_opts o{};
  o.require_frame_auth = 1;
  Server srv(o);
  Session s = NewSession();
  Head plain(srv.port());
  EXPECT_FALSE(plain.Handshake(s, 0, 1, false, kToken, PS_VERSION, /*auth=*/false));
  EXPECT_NE(plain.last_text().find("requires frame authentication"), std::string::npos) << plain.last_text();
  Head tagged(srv.port());
  ASSERT_TRUE(tagged.Handshake(s, 0, 1, false));
  EXPECT_TRUE(tagged.ExpectReady()) << tagged.last_text();
}

// ---------------------------------------------------------------------------------------------
// Frame authentication: a changed bit or a replayed frame closes the session (ERROR naming the
// tag to every member), never a wrong sum.

TEST(PsServerFrameAuth, FlippedBitClosesSession) {
  Server srv;
  Session s = NewSession();
  Heads heads = JoinAll(srv, s, 2, true);
  std::vector<uint8_t> a = RandomInput(kFloat32, 1024, 1), b = RandomInput(kFloat32, 1024, 2);
  ASSERT_TRUE(heads[0]->Push(0, 0, 0, kFloat32, kSum, a));
  std::vector<uint8_t> f = heads[1]->Sealed(Head::PushHdr(0, 0, 1, kFloat32, kSum, b.size()), b.data());
  f[PS_HDR_BYTES + 100] ^= 0x04;  // on the path: one bit of the gradient
  ASSERT_TRUE(heads[1]->SendRaw(f.data(), f.size()));
  for (auto &h : heads) {  // an ERROR naming the tag, then end-of-stream; never a RESULT
    Frame r;
    std::string text;
    while (h->Read(&r)) {
      EXPECT_NE(r.h.type, PS_RESULT) << "a RESULT from a modified input";
      if (r.h.type == PS_ERROR) text = r.Text();
    }
    EXPECT_NE(text.find("authentication tag"), std::string::npos) << text;
  }
  EXPECT_TRUE(srv.MemoryDrains());
}

// The same with a header field the checksum covers (an attacker recomputes the checksum).
TEST(PsServerFrameAuth, ChangedHeaderClosesSession) {
  Server srv;
  Session s = NewSession();
  Heads heads = JoinAll(srv, s, 2, true);
  std::vector<uint8_t> a = RandomInput(kInt32, 64, 1);
  ps_hdr h = Head::PushHdr(0, 0, 0, kInt32, kSum, a.size());
  std::vector<uint8_t> f = heads[0]->Sealed(h, a.data());
  h.op = 2;  // sum -> max, with a valid header checksum
  ps_hdr_encode(&h, f.data());
  ASSERT_TRUE(heads[0]->SendRaw(f.data(), f.size()));
  for (auto &hd : heads) EXPECT_TRUE(hd->WaitClosed());
  EXPECT_NE(heads[1]->last_text().find("authentication tag"), std::string::npos) << heads[1]->last_text();
}

// A frame recorded on the wire and sent again (here: a PUSH of an operation already released, which
// the server would otherwise take as the first input of a new partition) fails its tag.
TEST(PsServerFrameAuth, ReplayedFrameRejected) {
  Server srv;
  Session s = NewSession();
  Heads heads = JoinAll(srv, s, 2, true);
  std::vector<std::vector<uint8_t>> in = {RandomInput(kInt32, 256, 1), RandomInput(kInt32, 256, 2)};
  std::vector<uint8_t> recorded =
      heads[0]->Sealed(Head::PushHdr(4, 0, 0, kInt32, kSum, in[0].size()), in[0].data());
  ASSERT_TRUE(heads[0]->SendRaw(recorded.data(), recorded.size()));
  ASSERT_TRUE(heads[1]->Push(4, 0, 1, kInt32, kSum, in[1]));
  for (auto &h : heads) {
    Frame f;
    ASSERT_TRUE(h->Read(&f));
    ASSERT_EQ(f.h.type, PS_RESULT) << f.Text();
    EXPECT_TRUE(f.payload == Expected(kInt32, in));
  }
  for (auto &h : heads) ASSERT_TRUE(h->Done(4, 0));
  for (auto &h : heads) {
    Frame f;
    ASSERT_TRUE(h->Read(&f));
    ASSERT_EQ(f.h.type, PS_RELEASE) << f.Text();
  }
  ASSERT_TRUE(heads[0]->SendRaw(recorded.data(), recorded.size()));  // the replay
  for (auto &h : heads) EXPECT_TRUE(h->WaitClosed());
  EXPECT_NE(heads[1]->last_text().find("authentication tag"), std::string::npos) << heads[1]->last_text();
  EXPECT_TRUE(srv.MemoryDrains());
}

// ---------------------------------------------------------------------------------------------
// Unauthenticated connections: capped and timed out.

// --max-pending connections in the handshake: a new one evicts the oldest (whose socket is shut,
// with no word), so idle connections cannot keep a head out (they used to: every new connection
// was refused while they waited out their timeout); the rest end at the handshake timeout.
TEST(PsServerLimits, PendingHandshakesCappedOldestEvictedAndTimedOut) {
  ps_server_opts o{};
  o.max_pending = 3;
  o.handshake_timeout_s = 0.5;
  Server srv(o);
  Heads idle;
  for (int i = 0; i < 3; i++) idle.emplace_back(new Head(srv.port()));
  double end = Now() + 3;
  while (ps_server_pending(srv.get()) < 3 && Now() < end) usleep(1000);
  ASSERT_EQ(3, ps_server_pending(srv.get()));
  double t0 = Now();
  Head extra(srv.port());
  ASSERT_TRUE(extra.Handshake(NewSession(), 0, 1, false)) << extra.last_text();
  EXPECT_TRUE(extra.ExpectReady()) << "a head with idle connections ahead of it was kept out";
  EXPECT_TRUE(idle[0]->WaitClosed(1)) << "the oldest was not evicted";
  EXPECT_EQ(idle[0]->last_text(), "") << "an evicted connection is closed without a word";
  EXPECT_LT(Now() - t0, 0.45) << "evicted only at the timeout, not at once";
  for (size_t i = 1; i < idle.size(); i++) {
    EXPECT_TRUE(idle[i]->WaitClosed(2));
    EXPECT_NE(idle[i]->last_text().find("handshake not finished"), std::string::npos) << idle[i]->last_text();
  }
  for (auto &h : idle) h->Close();
  EXPECT_LT(Now() - t0, 1.5);
  end = Now() + 3;
  while (ps_server_pending(srv.get()) > 0 && Now() < end) usleep(1000);
  EXPECT_EQ(0, ps_server_pending(srv.get()));
  Head ok(srv.port());
  ASSERT_TRUE(ok.Handshake(NewSession(), 0, 1, false)) << ok.last_text();
  EXPECT_TRUE(ok.ExpectReady());
  EXPECT_EQ(0, ps_server_pending(srv.get())) << "an authenticated head still counted as pending";
}

// One address may hold at most 32 connections in the handshake: the 33rd is refused at once for
// load (PS_FLAG_BUSY: a head tries again), and a head from another address is not affected.
TEST(PsServerLimits, PendingPerSourceCapped) {
  ps_server_opts o{};
  o.handshake_timeout_s = 3;
  Server srv(o);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(srv.port()));
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::vector<int> held;
  for (int i = 0; i < 32; i++) held.push_back(flood::Stranger(to, 2, true));
  double end = Now() + 3;
  while (ps_server_pending(srv.get()) < 32 && Now() < end) usleep(1000);
  ASSERT_EQ(32, ps_server_pending(srv.get()));
  int extra = flood::Stranger(to, 2, true);
  ASSERT_GE(extra, 0);
  uint8_t buf[PS_HDR_BYTES + PS_MAX_TEXT];
  pollfd p = {extra, POLLIN, 0};
  ASSERT_EQ(1, poll(&p, 1, 1000)) << "the 33rd connection from one address was not refused at once";
  ssize_t n = recv(extra, buf, sizeof buf, 0);
  ASSERT_GE(n, (ssize_t)PS_HDR_BYTES);
  ps_hdr h;
  char err[128];
  ASSERT_EQ(0, ps_hdr_decode(buf, &h, err, sizeof err)) << err;
  EXPECT_EQ(h.type, PS_REFUSE);
  EXPECT_TRUE(h.flags & PS_FLAG_BUSY);
  Head ok(srv.port());  // 127.0.0.1
  ASSERT_TRUE(ok.Handshake(NewSession(), 0, 1, false)) << ok.last_text();
  EXPECT_TRUE(ok.ExpectReady());
  close(extra);
  for (int fd : held) close(fd);
}

// A flood of strangers (the whole --max-pending table held idle from 8 addresses, and more
// churning from 64 others) while heads hand-shake: every head gets through, repeatedly.
TEST(PsServerLimits, HeadsGetThroughAFloodOfStrangers) {
  ps_server_opts o{};
  Server srv(o);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(srv.port()));
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  flood::Flood f(to, 16, 8);
  ASSERT_GE(f.held(), 100) << "the attack could not be set up";
  usleep(300000);
  for (int k = 0; k < 10; k++) {
    double t0 = Now();
    bool ready = false;
    std::string why;
    for (int attempt = 0; !ready && Now() < t0 + 5; attempt++) {  // as the head does: again when turned away
      Head head(srv.port());
      ready = head.Handshake(NewSession(), 0, 1, false) && head.ExpectReady();
      why = head.last_text();
      if (!ready) usleep(100000);
    }
    EXPECT_TRUE(ready) << "try " << k << ": " << why;
  }
  EXPECT_GT(f.made(), 200) << "the churn did not run";
}

// A slow-loris head that trickles its HELLO a byte at a time is dropped at the handshake timeout.
TEST(PsServerLimits, SlowHandshakeDropped) {
  ps_server_opts o{};
  o.handshake_timeout_s = 0.5;
  Server srv(o);
  Head h(srv.port());
  ps_hello hello{};
  hello.version = PS_VERSION;
  hello.nranks = 1;
  uint8_t frame[PS_HDR_BYTES + PS_HELLO_BYTES];
  ps_hdr hh{};
  hh.type = PS_HELLO;
  hh.len = PS_HELLO_BYTES;
  ps_hdr_encode(&hh, frame);
  ps_hello_encode(&hello, frame + PS_HDR_BYTES);
  double t0 = Now();
  bool closed = false;
  for (size_t i = 0; i < sizeof frame && !closed; i++) {
    if (!h.SendRaw(frame + i, 1)) break;
    closed = !h.Quiet(0.05);
  }
  EXPECT_TRUE(h.WaitClosed(2));
  EXPECT_LT(Now() - t0, 1.5);
  EXPECT_NE(h.last_text().find("handshake not finished"), std::string::npos) << h.last_text();
}

// ---------------------------------------------------------------------------------------------
// Failures: the broken session closes promptly, a concurrent session is unharmed.

enum class Fault { kGarbageHeader, kOversizedLen, kPushBeforeReady, kWrongRank, kDuplicatePush,
                   kLengthMismatch, kDisconnectMidPush };

class PsServerFailure : public ::testing::TestWithParam<Fault> {};

TEST_P(PsServerFailure, ClosesOnlyThatSession) {
  Server srv;
  Session sa = NewSession(), sb = NewSession();
  Fault fault = GetParam();
  Heads a;
  if (fault == Fault::kPushBeforeReady) {
    for (uint32_t r = 0; r < 2; r++) {  // rank 2 never joins
      a.emplace_back(new Head(srv.port()));
      ASSERT_TRUE(a.back()->Handshake(sa, r, 3, false));
    }
  } else {
    a = JoinAll(srv, sa, 3, false);
  }
  Heads b = JoinAll(srv, sb, 3, false);
  std::vector<uint8_t> data = RandomInput(kFloat32, 1024, 9);

  double t0 = Now();
  switch (fault) {
  case Fault::kGarbageHeader: {
    uint8_t junk[PS_HDR_BYTES];
    memset(junk, 0x5a, sizeof junk);
    ASSERT_TRUE(a[1]->SendRaw(junk, sizeof junk));
    break;
  }
  case Fault::kOversizedLen: {
    ps_hdr h = Head::PushHdr(0, 0, 1, kFloat32, kSum, 0);
    h.len = PS_MAX_PAYLOAD + 4;
    uint8_t raw[PS_HDR_BYTES];
    ps_hdr_encode(&h, raw);  // a well-formed header with a length over the limit
    ASSERT_TRUE(a[1]->SendRaw(raw, sizeof raw));
    break;
  }
  case Fault::kPushBeforeReady:
    ASSERT_TRUE(a[1]->Push(0, 0, 1, kFloat32, kSum, data));
    break;
  case Fault::kWrongRank:
    ASSERT_TRUE(a[1]->Push(0, 0, 2, kFloat32, kSum, data));
    break;
  case Fault::kDuplicatePush:
    ASSERT_TRUE(a[1]->Push(0, 0, 1, kFloat32, kSum, data));
    ASSERT_TRUE(a[1]->Push(0, 0, 1, kFloat32, kSum, data));
    break;
  case Fault::kLengthMismatch:
    ASSERT_TRUE(a[0]->Push(0, 0, 0, kFloat32, kSum, data));
    data.resize(data.size() - 4);
    ASSERT_TRUE(a[1]->Push(0, 0, 1, kFloat32, kSum, data));
    break;
  case Fault::kDisconnectMidPush: {
    ASSERT_TRUE(a[0]->Push(0, 0, 0, kFloat32, kSum, data));
    ps_hdr h = Head::PushHdr(0, 0, 1, kFloat32, kSum, data.size());
    uint8_t raw[PS_HDR_BYTES];
    ps_hdr_encode(&h, raw);
    ASSERT_TRUE(a[1]->SendRaw(raw, sizeof raw));
    ASSERT_TRUE(a[1]->SendRaw(data.data(), data.size() / 2));
    usleep(5000);
    a[1]->Close();
    break;
  }
  }
  for (size_t r = 0; r < a.size(); r++) {
    if (a[r]->fd() < 0) continue;
    EXPECT_TRUE(a[r]->WaitClosed(2)) << "rank " << r << " of the broken session still open";
  }
  EXPECT_LT(Now() - t0, 1.0) << "not closed promptly";
  EXPECT_FALSE(a[0]->last_text().empty()) << "no ERROR to the other members";

  // Session b still works.
  std::vector<std::vector<uint8_t>> in;
  for (uint32_t r = 0; r < 3; r++) {
    in.push_back(RandomInput(kFloat32, 777, 40 + r));
    ASSERT_TRUE(b[r]->Push(5, 1, r, kFloat32, kSum, in[r]));
  }
  for (uint32_t r = 0; r < 3; r++) {
    Frame f;
    ASSERT_TRUE(b[r]->Read(&f)) << "rank " << r << " of the healthy session";
    ASSERT_EQ(f.h.type, PS_RESULT) << f.Text();
    EXPECT_TRUE(f.payload == Expected(kFloat32, in));
  }
  EXPECT_TRUE(srv.MemoryDrains()) << "the closed session's memory was not freed";
  EXPECT_EQ(1, ps_server_sessions(srv.get()));
}

std::string FaultName(const ::testing::TestParamInfo<Fault> &i) {
  static const char *const names[] = {"GarbageHeader", "OversizedLen",   "PushBeforeReady",
                                      "WrongRank",     "DuplicatePush",  "LengthMismatch",
                                      "DisconnectMidPush"};
  return names[static_cast<int>(i.param)];
}

INSTANTIATE_TEST_SUITE_P(PsServer, PsServerFailure,
                         ::testing::Values(Fault::kGarbageHeader, Fault::kOversizedLen,
                                           Fault::kPushBeforeReady, Fault::kWrongRank,
                                           Fault::kDuplicatePush, Fault::kLengthMismatch,
                                           Fault::kDisconnectMidPush),
                         FaultName);

// --max-memory: a push over the limit fails its session (ERROR) and frees everything.
TEST(PsServerMemory, LimitClosesSession) {
  ps_server_opts o{};
  o.max_memory = 1 << 20;
  Server srv(o);
  Session s = NewSession();
  Heads heads = JoinAll(srv, s, 3, false);
  std::vector<uint8_t> big(400 << 10, 1);
  for (uint32_t r = 0; r < 3; r++) heads[r]->Push(0, 0, r, kInt32, kSum, big);
  for (auto &h : heads) EXPECT_TRUE(h->WaitClosed());
  EXPECT_NE(heads[0]->last_text().find("memory limit"), std::string::npos) << heads[0]->last_text();
  EXPECT_TRUE(srv.MemoryDrains());
}

// Placeholders for heads that completed a partition at a lost server (GONE) count against
// --max-memory like partition data: a head sending GONE for ever more partitions hits the limit
// instead of growing the server without bound.
TEST(PsServerMemory, GonePlaceholdersCount) {
  ps_server_opts o{};
  o.max_memory = 64 << 10;
  Server srv(o);
  Session s = NewSession();
  Heads heads = JoinAll(srv, s, 3, true);
  ASSERT_TRUE(heads[0]->Gone(100, 0));
  double end = Now() + 2;
  while (ps_server_memory(srv.get()) == 0 && Now() < end) usleep(1000);
  EXPECT_GT(ps_server_memory(srv.get()), 0u) << "a GONE placeholder costs nothing";
  for (uint32_t p = 1; p < 2000; p++)
    if (!heads[0]->Gone(100, p)) break;  // the server closes the session part-way
  for (auto &h : heads) EXPECT_TRUE(h->WaitClosed());
  EXPECT_NE(heads[1]->last_text().find("memory limit"), std::string::npos) << heads[1]->last_text();
  EXPECT_TRUE(srv.MemoryDrains());
}

// A partition settled by GONE takes its length from the first PUSH after it; a PUSH of another
// length is refused like one that differs from an unsettled partition's first PUSH.  It used to
// be taken, and what it reserved beyond the partition's length stayed counted when the partition
// was freed: three rounds (GONE, a 4-byte PUSH, a 16 MiB PUSH header then close) left --max-memory
// 64M exhausted for every later job.  Now every byte is given back, and a later job gets its memory.
TEST(PsServerMemory, SettledPartitionPushOfAnotherLengthLeaksNothing) {
  ps_server_opts o{};
  o.max_memory = 64 << 20;
  Server srv(o);
  for (int round = 0; round < 3; round++) {
    Session s = NewSession();
    Heads heads = JoinAll(srv, s, 3, true);
    ASSERT_TRUE(heads[0]->Gone(7, 0));
    ASSERT_TRUE(heads[1]->Push(7, 0, 1, kFloat32, kSum, std::vector<uint8_t>(4, 1)));
    uint8_t raw[PS_HDR_BYTES];
    ps_hdr h = Head::PushHdr(7, 0, 2, kFloat32, kSum, 16 << 20);
    ps_hdr_encode(&h, raw);
    ASSERT_TRUE(heads[2]->SendRaw(raw, sizeof raw));  // the header only, then gone
    usleep(50000);
    for (auto &hd : heads) hd->Close();
  }
  EXPECT_TRUE(srv.MemoryDrains()) << ps_server_memory(srv.get()) << " bytes still counted with no session open";
  Session s = NewSession();
  Heads heads = JoinAll(srv, s, 1, false);
  std::vector<uint8_t> big(16 << 20, 2);
  for (uint32_t p = 0; p < 3; p++) ASSERT_TRUE(heads[0]->Push(1, p, 0, kInt32, kSum, big));  // 48 MiB at once
  for (int k = 0; k < 3; k++) {
    Frame f;
    ASSERT_TRUE(heads[0]->Read(&f));
    EXPECT_EQ(f.h.type, PS_RESULT) << "a later job was refused memory: " << f.Text();
  }
}

// Heads on their own threads, partitions larger than the socket buffers (RESULTs finish on
// writability, from other threads than the reducing one), hold-back, four worker threads.
TEST(PsServerStress, ConcurrentHeadsLargePartitions) {
  ps_server_opts o{};
  o.threads = 4;
  Server srv(o);
  Session s = NewSession();
  const uint32_t kRanks = 4, kParts = 6;
  const size_t kCount = 256 << 10;  // 1 MiB of fp32
  Heads heads = JoinAll(srv, s, kRanks, true);
  std::vector<std::vector<std::vector<uint8_t>>> in(kParts);
  std::vector<std::vector<uint8_t>> want(kParts);
  for (uint32_t p = 0; p < kParts; p++) {
    for (uint32_t r = 0; r < kRanks; r++) in[p].push_back(RandomInput(kFloat32, kCount, 1000 + p * 10 + r));
    want[p] = Expected(kFloat32, in[p]);
  }
  std::vector<std::thread> threads;
  for (uint32_t r = 0; r < kRanks; r++) {
    threads.emplace_back([&, r] {
      Head &h = *heads[r];
      for (uint32_t k = 0; k < kParts; k++) {
        uint32_t p = (k + r) % kParts;  // every head in its own order
        ASSERT_TRUE(h.Push(3, p, r, kFloat32, kSum, in[p][r]));
      }
      for (uint32_t k = 0; k < kParts; k++) {
        Frame f;
        ASSERT_TRUE(h.Read(&f, 10)) << "rank " << r;
        ASSERT_EQ(f.h.type, PS_RESULT) << f.Text();
        ASSERT_LT(f.h.part, kParts);
        EXPECT_TRUE(f.payload == want[f.h.part]) << "rank " << r << " part " << f.h.part;
      }
      for (uint32_t p = 0; p < kParts; p++) ASSERT_TRUE(h.Done(3, p));
      for (uint32_t k = 0; k < kParts; k++) {
        Frame f;
        ASSERT_TRUE(h.Read(&f, 10)) << "rank " << r;
        EXPECT_EQ(f.h.type, PS_RELEASE) << f.Text();
      }
    });
  }
  for (auto &t : threads) t.join();
  EXPECT_TRUE(srv.MemoryDrains());
}

// A server stopping closes its sessions' connections.
TEST(PsServerStop, ClosesConnections) {
  auto srv = std::make_unique<Server>();
  Session s = NewSession();
  Heads heads = JoinAll(*srv, s, 2, true);
  ASSERT_TRUE(heads[0]->Push(0, 0, 0, kInt32, kSum, RandomInput(kInt32, 100, 1)));
  usleep(10000);
  srv.reset();
  for (auto &h : heads) EXPECT_TRUE(h->WaitClosed(1));
}

}  // namespace
