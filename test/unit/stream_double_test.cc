// A fourth stream transport (transport/stream.h), in memory: the data path (stripe/tx.c,
// stripe/rx.c) runs over it unchanged.  Each stream is a pipe of whole frames one way and
// acknowledgements the other; the receiver places a frame's payload in pieces over several calls
// (so a frame is in flight when another stream completes its message), and a pipe can be cut
// (both ends see the stream break).  Only the table below and what it points to are this
// transport: tx.c and rx.c know nothing of it.
#include <gtest/gtest.h>
#include <stdio.h>
#include <string.h>

#include <algorithm>
#include <array>
#include <deque>
#include <vector>

extern "C" {
#include "comm/comm.h"
#include "comm/life.h"
#include "stripe/stripe.h"
#include "log.h"
#include "transport/stream.h"
}
#include "wire_watch.h"

namespace {

using wire_watch::Logger;
using wire_watch::Now;
using wire_watch::TakeWarnings;

constexpr int kMaxStreams = 4;
constexpr size_t kPiece = 1000;  // payload bytes the receiver places per frame and call

// One stream's two directions.
struct Pipe {
  std::deque<std::vector<uint8_t>> frames;  // header + payload, sender -> receiver
  std::deque<std::array<uint8_t, BRAID_FRAME_HDR_BYTES>> acks;  // receiver -> sender
  bool cut = false;  // broken: both ends see it, what was in it is lost
};
Pipe pipes[kMaxStreams];

// A stream's state (s->tp).
struct End {
  Pipe* pipe;
  bool in_frame;
  braid_rx_frame fr;  // the frame being placed
  size_t off;         // its payload bytes placed so far
};

End* end_of(const braid_stream* s) { return static_cast<End*>(s->tp); }

ncclResult_t mem_start(braid_comm* c) {
  for (int i = 0; i < c->nstreams; i++) c->streams[i].tp = new End{&pipes[i], false, {}, 0};
  return ncclSuccess;
}

void mem_close(braid_comm*, braid_stream* s) {
  delete end_of(s);
  s->tp = nullptr;
}

void mem_forget(braid_comm*, const void*, size_t) {}

// Every queued frame goes into the pipe whole: written at once.
int mem_tx_write(braid_comm* c, braid_stream* s) {
  Pipe* p = end_of(s)->pipe;
  if (p->cut) return EPIPE;
  while (s->tx_count > 0) {
    braid_txframe* f = &s->tx[s->tx_head];
    std::vector<uint8_t> bytes(f->hdr, f->hdr + BRAID_FRAME_HDR_BYTES);
    if (f->len) bytes.insert(bytes.end(), f->payload, f->payload + f->len);
    p->frames.push_back(std::move(bytes));
    s->frames_started++;
    braid_tx_written(c, f->req, f->len);
    s->tx_head = (s->tx_head + 1) % BRAID_SEND_BATCH;
    s->tx_count--;
  }
  return 0;
}

int mem_tx_failed(braid_comm*, braid_stream*) { return 0; }  // no frame is ever partly out

int mem_read_ack(braid_comm*, braid_stream* s, uint8_t hdr[BRAID_FRAME_HDR_BYTES], char* why,
                 size_t whylen) {
  Pipe* p = end_of(s)->pipe;
  if (p->cut) return snprintf(why, whylen, "the pipe was cut"), -1;
  if (p->acks.empty()) return 0;
  memcpy(hdr, p->acks.front().data(), BRAID_FRAME_HDR_BYTES);
  p->acks.pop_front();
  return 1;
}

int mem_poke(braid_comm*, braid_stream*, uint64_t, char*, size_t) { return 0; }
bool mem_path_dead(braid_comm*, braid_stream*, uint64_t) { return false; }

void mem_rx(braid_comm* c, braid_stream* s, bool read) {
  End* e = end_of(s);
  while (!c->err && !s->dead) {
    if (e->pipe->cut) {
      if (braid_rx_broken(c, s, "the pipe was cut", e->in_frame) == 0) e->in_frame = false;
      return;
    }
    if (!e->in_frame) {
      if (!read || e->pipe->frames.empty()) return;
      if (braid_rx_begin(c, e->pipe->frames.front().data(), &e->fr) <= 0) return;
      e->in_frame = true;
      e->off = 0;
    }
    const std::vector<uint8_t>& b = e->pipe->frames.front();
    size_t k = std::min<size_t>(e->fr.frame.len - e->off, kPiece);
    if (k && !e->fr.discard) memcpy(e->fr.dest + e->off, b.data() + BRAID_FRAME_HDR_BYTES + e->off, k);
    e->off += k;
    if (e->off < e->fr.frame.len) return;  // the rest on a later call
    e->pipe->frames.pop_front();
    e->in_frame = false;
    braid_rx_end(c, s, &e->fr);
  }
}

braid_rx_frame* mem_rx_frame(braid_stream* s, int k) {
  End* e = end_of(s);
  return k == 0 && e->in_frame ? &e->fr : nullptr;
}

bool mem_ack_ready(braid_comm*, braid_stream*, bool, uint64_t) { return true; }

bool mem_ack_send(braid_comm*, braid_stream* s, const uint8_t hdr[BRAID_FRAME_HDR_BYTES], bool,
                  uint64_t) {
  Pipe* p = end_of(s)->pipe;
  if (p->cut) return false;
  std::array<uint8_t, BRAID_FRAME_HDR_BYTES> a;
  memcpy(a.data(), hdr, a.size());
  p->acks.push_back(a);
  return true;
}

void mem_rx_describe(const braid_stream* s, char* buf, size_t len) {
  snprintf(buf, len, "%zu frames in the pipe", end_of(s)->pipe->frames.size());
}

braid_stream_ops make_ops() {
  braid_stream_ops o = {};
  o.name = "memory";
  o.start = mem_start;
  o.close = mem_close;
  o.forget = mem_forget;
  o.tx_poll = nullptr;
  o.tx_write = mem_tx_write;
  o.tx_failed = mem_tx_failed;
  o.read_ack = mem_read_ack;
  o.poke = mem_poke;
  o.path_dead = mem_path_dead;
  o.rx = mem_rx;
  o.rx_frame = mem_rx_frame;
  o.ack_ready = mem_ack_ready;
  o.ack_send = mem_ack_send;
  o.rx_describe = mem_rx_describe;
  return o;
}
const braid_stream_ops mem_ops = make_ops();

uint8_t content(int msg, size_t off) { return (uint8_t)(msg * 131 + off * 7 + (off >> 9)); }

class StreamDouble : public ::testing::Test {
 protected:
  void SetUp() override {
    braid_log_set_logger(Logger);
    TakeWarnings();
    for (Pipe& p : pipes) p = Pipe();
  }
  void TearDown() override {
    braid_comm_free(tx_);
    braid_comm_free(rx_);
  }

  braid_comm* Comm(braid_comm_kind kind, int n) {
    braid_comm* c = braid_comm_new(kind, 0, n);
    if (!c) return nullptr;
    c->nrails = c->nprimary = n;
    snprintf(c->peer, sizeof c->peer, "memory");
    for (int i = 0; i < n; i++) {
      c->streams[i].rail = i;
      c->streams[i].rail_name = "mem";
      c->streams[i].rail_Bps = 1.25e9;
    }
    c->acks = n > 1;  // as braid_comm_ready says
    c->chunk = 4096;
    c->sops = &mem_ops;
    if (c->sops->start(c) != ncclSuccess ||
        (kind == BRAID_COMM_SEND ? braid_tx_init(c) : braid_rx_init(c)) != ncclSuccess) {
      braid_comm_free(c);
      return nullptr;
    }
    return c;
  }

  // Over n streams: posts a receive for each size, then the sends, and drives both comms until
  // all are done; cut_after: calls after which stream 1's pipe is cut (0: never).
  void Run(int n, const std::vector<size_t>& sizes, int cut_after) {
    tx_ = Comm(BRAID_COMM_SEND, n);
    rx_ = Comm(BRAID_COMM_RECV, n);
    ASSERT_TRUE(tx_ && rx_);
    std::vector<std::vector<char>> out(sizes.size()), in(sizes.size());
    std::vector<braid_req*> sends, recvs;
    for (size_t m = 0; m < sizes.size(); m++) {
      in[m].assign(sizes[m] + 1, 0);  // (one byte more: a receive may be larger than its send)
      braid_req* r = braid_req_alloc(rx_, BRAID_REQ_RECV);
      ASSERT_TRUE(r);
      r->n = 1;
      r->slot[0] = braid_recv_slot{in[m].data(), in[m].size(), (int)(m % 3), -1, 0, false, nullptr, nullptr};
      ASSERT_EQ(braid_rx_post(rx_, r), ncclSuccess);
      recvs.push_back(r);
    }
    for (size_t m = 0; m < sizes.size(); m++) {
      out[m].resize(sizes[m]);
      for (size_t b = 0; b < sizes[m]; b++) out[m][b] = (char)content((int)m, b);
      braid_req* r = braid_req_alloc(tx_, BRAID_REQ_SEND);
      ASSERT_TRUE(r);
      r->data = out[m].data();
      r->size = sizes[m];
      r->tag = (int)(m % 3);
      r->seq = tx_->tx.next_seq++;
      ASSERT_EQ(braid_tx_send(tx_, r), ncclSuccess);
      sends.push_back(r);
    }
    auto all_done = [](const std::vector<braid_req*>& v) {
      return std::all_of(v.begin(), v.end(), [](braid_req* r) { return r->done.load(); });
    };
    int calls = 0;
    for (double end = Now() + 10; Now() < end && !(all_done(sends) && all_done(recvs)); calls++) {
      if (cut_after && calls == cut_after) {
        lost_ = pipes[1].frames.size() + end_of(&rx_->streams[1])->in_frame;
        pipes[1].cut = true;
      }
      ASSERT_EQ(braid_tx_progress(tx_), ncclSuccess);
      ASSERT_EQ(braid_rx_progress(rx_, true), ncclSuccess);
    }
    ASSERT_TRUE(all_done(sends)) << "sends not all acknowledged after " << calls << " calls";
    ASSERT_TRUE(all_done(recvs)) << "receives not all complete after " << calls << " calls";
    for (size_t m = 0; m < sizes.size(); m++) {
      EXPECT_EQ(recvs[m]->slot[0].size, sizes[m]) << "message " << m;
      EXPECT_TRUE(std::equal(out[m].begin(), out[m].end(), in[m].begin())) << "message " << m;
    }
  }

  braid_comm* tx_ = nullptr;
  braid_comm* rx_ = nullptr;
  size_t lost_ = 0;  // frames in stream 1's pipe when it was cut
};

const std::vector<size_t> kSizes = {0, 1, 4095, 4096, 4097, 70000, 3, 250000, 0, 12345};

TEST_F(StreamDouble, OneStreamMessagesArriveWhole) {
  Run(1, kSizes, 0);
  EXPECT_EQ(TakeWarnings(), "");
}

TEST_F(StreamDouble, ThreeStreamsMessagesArriveWholeAndAcknowledged) {
  Run(3, kSizes, 0);
  EXPECT_EQ(TakeWarnings(), "");
}

// Stream 1 breaks with frames in flight both ways: the sender re-sends its unacknowledged chunks
// on the other streams and every message still arrives whole.
TEST_F(StreamDouble, ACutStreamsDataIsResentOnTheOthers) {
  Run(3, {200000, 90000, 1, 0, 300000, 4096}, 40);
  EXPECT_GT(lost_, 0u) << "the cut came too late to lose frames";
  std::string w = TakeWarnings();
  EXPECT_NE(w.find("send stream 1 (rail 1, mem) to memory: the pipe was cut"), std::string::npos) << w;
  EXPECT_NE(w.find("receive stream 1 (rail 1) from memory: the pipe was cut"), std::string::npos) << w;
}

}  // namespace
