// Discrete-event simulation of rails and of a striping transport, driving braid's scheduler.
//
// Rails: a rate in bytes/s, a FIFO of chunks transmitted one at a time (the head's progress is
// kept across rate changes), a one-way propagation delay for data and for acks.  A scenario can
// change a rail's rate, fail it (everything queued or in the air is dropped, sends are refused,
// the transport sees an error fail_detect_ns later), black-hole it (it accepts data and holds it,
// with any data and acks in the air, delivering nothing) and recover it (held data and acks go
// out late: the receiver must discard duplicates).
//
// Transport: NCCL-shaped.  Up to `slots` messages are posted; a slot is reused only when the
// oldest message completes (NCCL tests its requests in order).  Messages are cut into chunks of at
// most `chunk` bytes (a small message is one chunk, whole on one rail) and queued; each chunk
// goes where braid_sched_pick() says, never to a rail that already holds a copy of it.  The receiver accepts a chunk's data once and discards
// later copies; every copy is acked on its rail.  A chunk is done at its first ack.  The
// transport keeps a generation per rail and credits the scheduler only with acks of the current
// generation; when a rail fails (error, or the scheduler's STALLED event) it calls
// braid_sched_failed() and re-queues that rail's unacked chunks ahead of everything else; on a
// LATE event it queues a second copy of them (a hedge: the originals stay on the rail); and it
// reconnects a DOWN rail (braid_sched_restored()) once braid_sched_retry_at() has passed and the
// rail accepts connections.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <queue>
#include <vector>

extern "C" {
#include "stripe/sched.h"
}

namespace braid_sim {

constexpr uint64_t kUs = 1000;
constexpr uint64_t kMs = 1000 * kUs;
constexpr uint64_t kSec = 1000 * kMs;

enum class Act { Rate, Fail, BlackHole, Recover };

struct Action {
  uint64_t at_ns;
  int rail;
  Act kind;
  double rate_Bps; // Rate only
};

struct Config {
  std::vector<double> rate_Bps; // one per rail
  uint64_t prop_ns = 50 * kUs;
  size_t chunk = 128 << 10;
  int slots = 8;
  std::vector<size_t> msgs; // sizes, posted in order
  std::vector<Action> actions;
  uint64_t tick_ns = kMs;
  uint64_t fail_detect_ns = kMs;
  uint64_t end_ns = 60 * kSec;
  uint64_t bin_ns = 10 * kMs;
  bool equal_striping = false; // baseline: chunk i on rail i mod n, rr_cap bytes per rail
  size_t rr_cap = 4 << 20;
  std::vector<double> nominal_Bps; // empty: the scheduler's prior
  bool hedge = true;               // act on LATE events
  bool withdraw_unsent = false;    // take back copies not yet transmitted once a chunk is done
  braid_sched_params params;
  Config() { braid_sched_params_default(&params); }
};

struct Result {
  bool complete = false;
  bool all_down_seen = false;
  uint64_t finish_ns = 0;
  uint64_t total_bytes = 0;
  std::vector<std::vector<uint64_t>> bins; // [bin][rail]: bytes accepted (first copies)
  uint64_t bin_ns = 0;
  std::vector<braid_sched_event> events;
  uint64_t dup_chunks = 0, lost_chunks = 0, resent_chunks = 0, hedged_chunks = 0;
  uint64_t accepted_bytes = 0; // first copies only: equals total_bytes when nothing is lost
  uint64_t withdrawn_chunks = 0;
  uint64_t inflight_mismatch = 0; // |scheduler's in-flight bytes - transport's|, summed over rails
  uint64_t pick_hash = 1469598103934665603ull, picks = 0;
  std::vector<uint64_t> sent_bytes;   // per rail, every copy
  uint64_t split_small = 0;           // messages <= chunk whose data came on more than one rail
  std::vector<braid_sched_rail> final_rails;

  // Accepted bytes per second over [t0, t1), one rail or all (-1).
  double Bps(uint64_t t0, uint64_t t1, int rail = -1) const {
    uint64_t sum = 0;
    for (uint64_t b = t0 / bin_ns; b < t1 / bin_ns && b < bins.size(); b++)
      for (size_t r = 0; r < bins[b].size(); r++)
        if (rail < 0 || (int)r == rail) sum += bins[b][r];
    return (double)sum * 1e9 / (double)(t1 - t0);
  }
  double Share(int rail, uint64_t t0, uint64_t t1) const { return Bps(t0, t1, rail) / Bps(t0, t1); }
  // Time of the first event of `reason` on `rail` at or after `after` (UINT64_MAX: none).
  uint64_t First(braid_sched_reason reason, int rail, uint64_t after = 0) const {
    for (const auto &e : events)
      if (e.reason == reason && e.rail == rail && e.at_ns >= after) return e.at_ns;
    return UINT64_MAX;
  }
  int Count(braid_sched_reason reason, int rail = -1) const {
    int n = 0;
    for (const auto &e : events) n += e.reason == reason && (rail < 0 || e.rail == rail);
    return n;
  }
};

class Sim {
 public:
  explicit Sim(const Config &c) : c_(c), n_((int)c.rate_Bps.size()) {}

  Result Run() {
    Setup();
    while (!q_.empty() && !Done()) {
      Ev e = q_.top();
      q_.pop();
      if (e.t > c_.end_ns) break;
      now_ = e.t;
      Dispatch(e);
      Pump();
    }
    return Finish();
  }

 private:
  enum class Kind { TxDone, Arrive, Ack, Action, Tick, FailNotice };
  enum class Mode { Up, Down, BlackHole };
  enum class CState { Idle, Queued, OnRail, Done };

  struct Pkt {
    uint32_t chunk;
    uint32_t tgen;    // transport's rail generation when sent
    uint64_t sent_ns;
  };
  struct Ev {
    uint64_t t, seq;
    Kind kind;
    int rail;
    Pkt pkt;
    uint64_t tag; // version (TxDone), epoch (Arrive/Ack), action index
    bool operator>(const Ev &o) const { return t != o.t ? t > o.t : seq > o.seq; }
  };
  struct Chunk {
    uint32_t msg, len;
    CState state;     // OnRail: not queued, not done, on `live` rails
    uint32_t live;    // current-generation copies on rails
    uint32_t on;      // bit r: rail r holds one of them
    uint32_t accepted;
    int accepted_rail;
  };
  struct Msg {
    size_t size;
    uint32_t first, n, acked;
  };
  struct Rail {
    double rate;
    Mode mode = Mode::Up;
    uint64_t epoch = 0, version = 0;
    std::deque<Pkt> fifo;
    bool tx = false;
    double head_left = -1; // bytes left of the head chunk, -1 when not started
    uint64_t head_mark = 0;
    std::vector<Pkt> held_data, held_acks;
  };
  struct TRail {
    uint32_t gen = 0;
    std::map<uint32_t, uint64_t> out; // chunk -> sent_ns, current generation
    size_t inflight = 0;
  };

  // ---- set-up and results

  void Setup() {
    braid_sched_init(&s_, n_, &c_.params, c_.nominal_Bps.empty() ? nullptr : c_.nominal_Bps.data(), 0);
    rails_.resize(n_);
    tr_.resize(n_);
    for (int r = 0; r < n_; r++) rails_[r].rate = c_.rate_Bps[r];
    res_.bin_ns = c_.bin_ns;
    res_.sent_bytes.assign(n_, 0);
    for (size_t m = 0; m < c_.msgs.size(); m++) {
      Msg msg{c_.msgs[m], (uint32_t)chunks_.size(), 0, 0};
      for (size_t off = 0; off < msg.size || (msg.size == 0 && off == 0); off += c_.chunk) {
        size_t len = msg.size - off < c_.chunk ? msg.size - off : c_.chunk;
        chunks_.push_back(Chunk{(uint32_t)m, (uint32_t)len, CState::Idle, 0, 0, 0, -1});
        msg.n++;
        if (msg.size == 0) break;
      }
      res_.total_bytes += msg.size;
      msgs_.push_back(msg);
    }
    for (size_t i = 0; i < c_.actions.size(); i++)
      Push(c_.actions[i].at_ns, Kind::Action, -1, Pkt{}, i);
    Push(0, Kind::Tick, -1, Pkt{}, 0);
    PostMore();
    Pump();
  }

  bool Done() const { return head_msg_ == msgs_.size(); }

  Result Finish() {
    res_.complete = Done();
    res_.finish_ns = now_;
    for (size_t m = 0; m < msgs_.size(); m++) CheckMessage(msgs_[m]);
    for (int r = 0; r < n_; r++) {
      res_.final_rails.push_back(s_.rail[r]);
      size_t a = s_.rail[r].inflight, b = tr_[r].inflight;
      res_.inflight_mismatch += a > b ? a - b : b - a;
    }
    return res_;
  }

  void CheckMessage(const Msg &m) {
    int rail = -2;
    for (uint32_t k = m.first; k < m.first + m.n; k++) {
      const Chunk &ch = chunks_[k];
      if (ch.accepted == 0) res_.lost_chunks++;
      res_.accepted_bytes += ch.accepted ? ch.len : 0;
      if (m.size <= c_.chunk && rail != -2 && rail != ch.accepted_rail) res_.split_small++;
      rail = ch.accepted_rail;
    }
  }

  void Push(uint64_t t, Kind k, int rail, Pkt p, uint64_t tag) { q_.push(Ev{t, seq_++, k, rail, p, tag}); }

  void Dispatch(const Ev &e) {
    switch (e.kind) {
    case Kind::TxDone: TxDone(e.rail, e.tag); break;
    case Kind::Arrive: Arrive(e.rail, e.pkt, e.tag); break;
    case Kind::Ack: AckArrives(e.rail, e.pkt, e.tag); break;
    case Kind::Action: DoAction(c_.actions[e.tag]); break;
    case Kind::Tick: Tick(); break;
    case Kind::FailNotice:
      if (rails_[e.rail].mode == Mode::Down) Fail(e.rail);
      break;
    }
  }

  // ---- rails

  void StartTx(int r) {
    Rail &R = rails_[r];
    if (R.mode != Mode::Up || R.tx || R.fifo.empty()) return;
    if (R.head_left < 0) R.head_left = chunks_[R.fifo.front().chunk].len;
    R.tx = true;
    R.head_mark = now_;
    R.version++;
    Push(now_ + (uint64_t)(R.head_left * 1e9 / R.rate + 0.999), Kind::TxDone, r, Pkt{}, R.version);
  }

  void PauseTx(int r) {
    Rail &R = rails_[r];
    if (!R.tx) return;
    R.head_left -= (double)(now_ - R.head_mark) * R.rate / 1e9;
    if (R.head_left < 0) R.head_left = 0;
    R.tx = false;
    R.version++; // cancels the pending TxDone
  }

  void TxDone(int r, uint64_t version) {
    Rail &R = rails_[r];
    if (version != R.version || !R.tx) return;
    Pkt p = R.fifo.front();
    R.fifo.pop_front();
    R.tx = false;
    R.head_left = -1;
    Push(now_ + c_.prop_ns, Kind::Arrive, r, p, R.epoch);
    StartTx(r);
  }

  void DoAction(const Action &a) {
    Rail &R = rails_[a.rail];
    switch (a.kind) {
    case Act::Rate:
      PauseTx(a.rail);
      R.rate = a.rate_Bps;
      StartTx(a.rail);
      break;
    case Act::Fail:
      R = Rail{R.rate, Mode::Down, R.epoch + 1, R.version + 1, {}, false, -1, 0, {}, {}};
      Push(now_ + c_.fail_detect_ns, Kind::FailNotice, a.rail, Pkt{}, 0);
      break;
    case Act::BlackHole:
      PauseTx(a.rail);
      R.mode = Mode::BlackHole;
      break;
    case Act::Recover: Recover(a.rail); break;
    }
  }

  void Recover(int r) {
    Rail &R = rails_[r];
    R.mode = Mode::Up;
    for (const Pkt &p : R.held_data) Push(now_ + c_.prop_ns, Kind::Arrive, r, p, R.epoch);
    for (const Pkt &p : R.held_acks) Push(now_ + c_.prop_ns, Kind::Ack, r, p, R.epoch);
    R.held_data.clear();
    R.held_acks.clear();
    StartTx(r);
  }

  // ---- receiver

  void Arrive(int r, const Pkt &p, uint64_t epoch) {
    Rail &R = rails_[r];
    if (epoch != R.epoch) return; // dropped with the rail
    if (R.mode == Mode::BlackHole) return R.held_data.push_back(p);
    Chunk &ch = chunks_[p.chunk];
    if (ch.accepted == 0) {
      ch.accepted = 1;
      ch.accepted_rail = r;
      uint64_t b = now_ / c_.bin_ns;
      if (res_.bins.size() <= b) res_.bins.resize(b + 1, std::vector<uint64_t>(n_, 0));
      res_.bins[b][r] += ch.len;
    } else {
      res_.dup_chunks++; // discarded: the receiver already holds this data
    }
    Push(now_ + c_.prop_ns, Kind::Ack, r, p, R.epoch);
  }

  // ---- transport

  void AckArrives(int r, const Pkt &p, uint64_t epoch) {
    Rail &R = rails_[r];
    if (epoch != R.epoch) return;
    if (R.mode == Mode::BlackHole) return R.held_acks.push_back(p);
    TRail &T = tr_[r];
    if (p.tgen == T.gen && T.out.erase(p.chunk)) {
      T.inflight -= chunks_[p.chunk].len;
      Drop(p.chunk, r);
      braid_sched_acked(&s_, r, chunks_[p.chunk].len, p.sent_ns, now_);
    }
    ChunkDone(p.chunk);
  }

  void ChunkDone(uint32_t c) {
    Chunk &ch = chunks_[c];
    if (ch.state == CState::Done) return;
    if (ch.state == CState::Queued) queued_bytes_ -= ch.len; // a late copy beat the resend
    ch.state = CState::Done;
    if (c_.withdraw_unsent)
      for (int r = 0; r < n_; r++) Withdraw(r, c);
    Msg &m = msgs_[ch.msg];
    if (++m.acked == m.n) PostMore();
  }

  void Drop(uint32_t c, int r) { // rail r no longer holds a live copy of chunk c
    chunks_[c].live--;
    chunks_[c].on &= ~(1u << r);
  }

  // Takes back rail r's current copy of chunk c if it has not started to go out.
  void Withdraw(int r, uint32_t c) {
    TRail &T = tr_[r];
    Rail &R = rails_[r];
    if (!T.out.count(c)) return;
    for (size_t k = 0; k < R.fifo.size(); k++) {
      if (R.fifo[k].chunk != c || R.fifo[k].tgen != T.gen) continue;
      if (k == 0 && R.head_left >= 0) return; // partly transmitted
      R.fifo.erase(R.fifo.begin() + (long)k);
      T.out.erase(c);
      T.inflight -= chunks_[c].len;
      Drop(c, r);
      res_.withdrawn_chunks++;
      braid_sched_withdrawn(&s_, r, chunks_[c].len, now_);
      return;
    }
  }

  // In-order completion frees slots; post while fewer than `slots` are outstanding.
  void PostMore() {
    while (head_msg_ < posted_ && msgs_[head_msg_].acked == msgs_[head_msg_].n) head_msg_++;
    while (posted_ < msgs_.size() && posted_ - head_msg_ < (size_t)c_.slots) {
      const Msg &m = msgs_[posted_++];
      for (uint32_t k = m.first; k < m.first + m.n; k++) {
        chunks_[k].state = CState::Queued;
        queue_.push_back(k);
        queued_bytes_ += chunks_[k].len;
      }
    }
  }

  void Fail(int r) {
    if (s_.rail[r].state == BRAID_RAIL_DOWN) return;
    braid_sched_failed(&s_, r, now_);
    TRail &T = tr_[r];
    T.gen++;
    for (const auto &o : T.out) Drop(o.first, r);
    Requeue(T, false);
    T.out.clear();
    T.inflight = 0;
  }

  // Queues another copy of every unacked chunk of a rail that has no other live copy (after a
  // failure), or only this one (LATE: a hedge, the original stays).  Oldest ends up first.
  void Requeue(const TRail &T, bool hedge) {
    for (auto it = T.out.rbegin(); it != T.out.rend(); ++it) {
      Chunk &ch = chunks_[it->first];
      if (ch.state != CState::OnRail || ch.live != (hedge ? 1u : 0u)) continue;
      ch.state = CState::Queued;
      queue_.push_front(it->first);
      queued_bytes_ += ch.len;
      (hedge ? res_.hedged_chunks : res_.resent_chunks)++;
    }
  }

  void Tick() {
    braid_sched_event ev[BRAID_SCHED_MAX_EVENTS];
    int n = braid_sched_tick(&s_, now_, ev, BRAID_SCHED_MAX_EVENTS);
    for (int i = 0; i < n; i++) {
      res_.events.push_back(ev[i]);
      if (c_.equal_striping) continue; // the baseline has no feedback
      if (ev[i].reason == BRAID_SCHED_STALLED) Fail(ev[i].rail);
      if (ev[i].reason == BRAID_SCHED_LATE && c_.hedge) Requeue(tr_[ev[i].rail], true);
    }
    for (int r = 0; r < n_; r++)
      if (s_.rail[r].state == BRAID_RAIL_DOWN && now_ >= braid_sched_retry_at(&s_, r) &&
          rails_[r].mode == Mode::Up)
        braid_sched_restored(&s_, r, now_);
    if (!Done()) Push(now_ + c_.tick_ns, Kind::Tick, -1, Pkt{}, 0);
  }

  int Choose(uint32_t c) {
    size_t len = chunks_[c].len;
    if (!c_.equal_striping) return braid_sched_pick_avoid(&s_, len, queued_bytes_, chunks_[c].on, now_);
    int r = rr_;
    if (tr_[r].inflight > 0 && tr_[r].inflight + len > c_.rr_cap) return BRAID_SCHED_WAIT;
    rr_ = (rr_ + 1) % n_;
    return r;
  }

  void Hash(uint64_t v) {
    for (int i = 0; i < 8; i++) res_.pick_hash = (res_.pick_hash ^ ((v >> (8 * i)) & 0xff)) * 1099511628211ull;
  }

  void Send(uint32_t c, int r) {
    Chunk &ch = chunks_[c];
    braid_sched_sent(&s_, r, ch.len, now_);
    tr_[r].out[c] = now_;
    tr_[r].inflight += ch.len;
    ch.state = CState::OnRail;
    ch.live++;
    ch.on |= 1u << r;
    res_.sent_bytes[r] += ch.len;
    rails_[r].fifo.push_back(Pkt{c, tr_[r].gen, now_});
    StartTx(r);
  }

  void Pump() {
    while (!queue_.empty()) {
      uint32_t c = queue_.front();
      if (chunks_[c].state != CState::Queued) {
        queue_.pop_front();
        continue;
      }
      int r = Choose(c);
      res_.picks++;
      Hash(now_), Hash(c), Hash((uint64_t)(int64_t)r);
      if (r < 0) {
        res_.all_down_seen |= r == BRAID_SCHED_ALL_DOWN;
        return;
      }
      if (rails_[r].mode == Mode::Down) { // the send is refused: an error on that rail
        Fail(r);
        continue;
      }
      queue_.pop_front();
      queued_bytes_ -= chunks_[c].len;
      Send(c, r);
    }
  }

  Config c_;
  int n_;
  braid_sched s_{};
  std::priority_queue<Ev, std::vector<Ev>, std::greater<Ev>> q_;
  uint64_t seq_ = 0, now_ = 0;
  std::vector<Rail> rails_;
  std::vector<TRail> tr_;
  std::vector<Chunk> chunks_;
  std::vector<Msg> msgs_;
  std::deque<uint32_t> queue_;
  size_t queued_bytes_ = 0, posted_ = 0, head_msg_ = 0;
  int rr_ = 0;
  Result res_;
};

inline Result Simulate(const Config &c) { return Sim(c).Run(); }

} // namespace braid_sim
