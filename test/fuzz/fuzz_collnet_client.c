/* libFuzzer target: the CollNet client's handling of what braid-ps sends back during operations
 * (net_plugin/collnet/collnet_op.c, with braid-ps's protocol, assignment and reduction code, compiled
 * in), driven through braid_coll_iallreduce / braid_coll_test on a collComm whose 1 to 3 server
 * connections are socketpairs; the harness plays the servers.
 *
 * The input is a script: a configuration byte (servers, rank, hold-back), then commands (an
 * opcode byte and its argument bytes; missing bytes read as zero): allreduces of fuzzer-chosen
 * sizes (one to many partitions), the servers reading what the client wrote (every frame must
 * decode: PUSH, DONE or GONE), and the servers' replies: a RESULT or RELEASE for a partition
 * pushed to them (right, or with its sequence, partition, length, data type or op changed), an
 * ERROR with text, a frame of a type the client never takes, arbitrary header bytes, an admission
 * word (re-admitting a server, collnet_rejoin.c: one never lost, or one with no connection), replies cut
 * at any byte; a server closing.  Checked, besides the sanitizers:
 * - a header that does not decode, a type the client does not take, an ERROR, and a RESULT or
 *   RELEASE for an operation never issued or with a length other than the partition's lose that
 *   server at the call that reads them;
 * - an allreduce reported done has in its receive buffer exactly the RESULT bytes sent for it. */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "collnet/collnet.h"
#include "collnet/collnet_int.h"
#include "net_stubs.h"
#include "proto.h"

#include "fuzz_check.h"
#include "fuzz_script.h"

/* collnet.c's, which this target does not compile in */
struct braid_collcomm *braid_collcomm_check(void *p, const char *what) {
  (void)what;
  struct braid_collcomm *cc = p;
  return cc && cc->magic == COLL_MAGIC ? cc : NULL;
}



#define MAX_OPS 24
#define MAX_PUSH 512
struct pushrec {
  uint64_t seq;
  uint32_t part, len;
  uint8_t dtype, op;
  uint64_t off; /* in the op (the harness knows the partition size it chose) */
};
struct hsrv {
  int fd;
  bool closed;
  uint8_t hdr[PS_HDR_BYTES];
  size_t got, skip;
  struct ps_hdr cur;
  struct pushrec push[MAX_PUSH];
  int npush;
};
struct hop {
  void *req;
  float *send, *recv;
  size_t bytes;
  bool live;
};

static struct braid_collcomm *cc;
static struct hsrv hs[3];
static int nsrv;
static struct hop ops[MAX_OPS];
static int nops;

/* The servers read what the client wrote. */
static void server_read(int i) {
  struct hsrv *h = &hs[i];
  if (h->closed) return;
  uint8_t buf[16384];
  for (;;) {
    ssize_t n = recv(h->fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n <= 0) return;
    for (ssize_t k = 0; k < n;) {
      if (h->skip) {
        size_t t = h->skip < (size_t)(n - k) ? h->skip : (size_t)(n - k);
        h->skip -= t, k += (ssize_t)t;
        continue;
      }
      size_t t = PS_HDR_BYTES - h->got;
      if (t > (size_t)(n - k)) t = (size_t)(n - k);
      memcpy(h->hdr + h->got, buf + k, t);
      h->got += t, k += (ssize_t)t;
      if (h->got < PS_HDR_BYTES) continue;
      h->got = 0;
      char err[160];
      if (ps_hdr_decode(h->hdr, &h->cur, err, sizeof err) != 0) {
        fprintf(stderr, "server %d: the client wrote a frame that does not decode: %s\n", i, err);
        CHECK(!"garbled frame from the client");
      }
      CHECK(h->cur.type == PS_PUSH || h->cur.type == PS_DONE || h->cur.type == PS_GONE);
      CHECK(h->cur.rank == (uint32_t)cc->rank);
      if (h->cur.type == PS_PUSH) {
        CHECK(h->cur.seq < cc->seq);
        if (h->npush < MAX_PUSH) {
          const struct ps_op *op = &cc->ops[h->cur.seq % PS_WINDOW];
          uint64_t off = op->seq == h->cur.seq && h->cur.part < op->nparts ? op->parts[h->cur.part].off : 0;
          h->push[h->npush++] = (struct pushrec){h->cur.seq, h->cur.part, h->cur.len, h->cur.dtype,
                                                 h->cur.op, off};
        }
      } else {
        CHECK(h->cur.len == 0);
      }
      h->skip = h->cur.len;
    }
  }
}

static void read_all(void) {
  for (int i = 0; i < nsrv; i++) server_read(i);
}

static void drive(void);

/* Writes all of p, or closes the server: a frame cut short by a full socket would leave the rest
 * of the stream misframed (a later frame read as its payload), which no real server does. */
static void write_srv(int i, const uint8_t *p, size_t n) {
  if (hs[i].closed) return;
  for (int stuck = 0; n;) {
    ssize_t w = send(hs[i].fd, p, n, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (w > 0) {
      p += w, n -= (size_t)w, stuck = 0;
      continue;
    }
    if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK) return; /* the client closed it: lost */
    read_all(); /* the client's writes may fill our side: drain them, */
    drive();    /* and let the client read ours */
    if (++stuck == 64) { /* it reads no more (no operation pending): the server gives up */
      close(hs[i].fd);
      hs[i].closed = true;
      return;
    }
  }
}

static void drive(void) {
  /* a test() on the first live op drives progress; with none, an idle pass */
  for (int k = 0; k < nops; k++)
    if (ops[k].live) {
      int done = 0, size = 0;
      ncclResult_t rc = braid_coll_test(ops[k].req, &done, &size);
      if (rc != ncclSuccess) {
        ops[k].live = false;
      } else if (done) {
        CHECK((size_t)size == ops[k].bytes);
        const struct ps_op *op = ops[k].req;
        for (size_t b = 0; b < ops[k].bytes; b++)
          if (((uint8_t *)ops[k].recv)[b] != content(op->seq, b)) {
            fprintf(stderr, "op %llu byte %zu: 0x%02x, the server sent 0x%02x\n",
                    (unsigned long long)op->seq, b, ((uint8_t *)ops[k].recv)[b], content(op->seq, b));
            CHECK(!"a completed allreduce holds other bytes than its RESULTs");
          }
        ops[k].live = false;
      }
      read_all();
      return;
    }
  braid_coll_idle_progress();
  read_all();
}

static void must_lose(int i, const char *what) {
  if (hs[i].closed || cc->srv[i].lost) return;
  /* test() reads only while an op is incomplete (the idle pass is rate-limited) */
  int pending = -1;
  for (int k = 0; k < nops && pending < 0; k++)
    if (ops[k].live && !((const struct ps_op *)ops[k].req)->complete) pending = k;
  if (pending < 0) return;
  for (int k = 0; k < 4 && !cc->srv[i].lost && ops[pending].live; k++) {
    int done = 0, size = 0;
    if (braid_coll_test(ops[pending].req, &done, &size) != ncclSuccess || done) ops[pending].live = false;
    read_all();
  }
  if (!ops[pending].live) return; /* (completed or failed: checked no further) */
  if (!cc->srv[i].lost) {
    fprintf(stderr, "server %d: %s was accepted\n", i, what);
    CHECK(!"garbage from a server accepted");
  }
}

static void reply(int i, uint8_t kind, uint8_t sel, uint8_t mut, uint8_t cut) {
  struct hsrv *h = &hs[i];
  if (h->closed || cc->srv[i].lost) return;
  uint8_t frame[PS_HDR_BYTES + 65536 + 16];
  struct ps_hdr r = {.rank = 0};
  size_t plen = 0;
  const char *bad = NULL;
  switch (kind % 6) {
    case 0:
    case 1: { /* RESULT / RELEASE for a partition pushed here, maybe altered */
      if (!h->npush) return;
      const struct pushrec *p = &h->push[sel % h->npush];
      r = (struct ps_hdr){.type = kind % 6 == 0 ? PS_RESULT : PS_RELEASE, .dtype = p->dtype,
                          .op = p->op, .len = kind % 6 == 0 ? p->len : 0, .part = p->part,
                          .seq = p->seq};
      switch (mut % 8) {
        case 1: r.seq = cc->seq + mut / 8; bad = "a reply for an operation never issued"; break;
        case 2: r.part += 1 + mut / 8; break;
        case 3:
          if (r.type == PS_RESULT) r.len = p->len + 1 + mut / 8 <= 65536 ? p->len + 1 + mut / 8 : p->len - 1;
          if (r.type == PS_RESULT) bad = "a RESULT of another length than its partition";
          break;
        case 4: r.dtype ^= 1; break;
        case 5: r.op ^= 1; break;
        case 6: r.flags = (uint8_t)(mut / 8 + 1); break; /* an admission word: any server, lost or not */
        default: break;
      }
      if (r.type == PS_RESULT && r.len > 65536) r.len = 65536;
      plen = r.type == PS_RESULT ? r.len : 0;
      /* The bytes a server would send for the partition the reply names: with the partition
       * changed (case 2) that is another one of the operation, which this server may hold too. */
      uint64_t off = p->off;
      const struct ps_op *rop = &cc->ops[r.seq % PS_WINDOW];
      if (r.part != p->part && rop->seq == r.seq && r.part < rop->nparts) off = rop->parts[r.part].off;
      for (size_t b = 0; b < plen; b++) frame[PS_HDR_BYTES + b] = content(r.seq, off + b);
      break;
    }
    case 2: { /* ERROR */
      static const char text[] = "fuzz: server error";
      r = (struct ps_hdr){.type = PS_ERROR, .len = sizeof text - 1};
      memcpy(frame + PS_HDR_BYTES, text, sizeof text - 1);
      plen = sizeof text - 1;
      bad = "an ERROR";
      break;
    }
    case 3: { /* a type the client never takes during operations */
      static const uint8_t types[] = {PS_HELLO, PS_CHALLENGE, PS_AUTH, PS_READY, PS_PUSH, PS_DONE,
                                      PS_GONE, PS_PROOF};
      r = (struct ps_hdr){.type = types[sel % sizeof types], .seq = 0};
      if (r.type == PS_CHALLENGE) r.len = PS_CHALLENGE_BYTES;
      if (r.type == PS_PROOF) r.len = PS_SERVER_PROOF_BYTES;
      if (r.type == PS_AUTH) r.len = PS_AUTH_BYTES;
      if (r.type == PS_HELLO) r.len = PS_HELLO_BYTES;
      plen = r.len;
      memset(frame + PS_HDR_BYTES, 0, plen);
      bad = "a frame of a type the client does not take";
      break;
    }
    default: { /* arbitrary header bytes */
      uint8_t raw[PS_HDR_BYTES];
      for (size_t b = 0; b < sizeof raw; b++) raw[b] = rd8();
      struct ps_hdr g;
      char err[160];
      if (ps_hdr_decode(raw, &g, err, sizeof err) == 0) return; /* (valid by chance: skip) */
      write_srv(i, raw, sizeof raw);
      must_lose(i, "a header that does not decode");
      return;
    }
  }
  ps_hdr_encode(&r, frame);
  size_t n = PS_HDR_BYTES + plen, c = cut % (n + 1);
  if (c && c < n) {
    write_srv(i, frame, c);
    drive();
    write_srv(i, frame + c, n - c);
  } else {
    write_srv(i, frame, n);
  }
  if (bad) must_lose(i, bad);
}

static void allreduce(uint32_t count) {
  if (nops == MAX_OPS) return;
  struct hop *o = &ops[nops];
  o->bytes = (size_t)count * sizeof(float);
  o->send = malloc(o->bytes ? o->bytes : 1);
  o->recv = malloc(o->bytes ? o->bytes : 1);
  CHECK(o->send && o->recv);
  memset(o->send, 0x11, o->bytes);
  memset(o->recv, 0xA5, o->bytes);
  void *req = NULL;
  ncclResult_t rc = braid_coll_iallreduce(cc, o->send, o->recv, count, ncclFloat32, ncclSum, NULL, NULL, &req);
  read_all();
  if (rc != ncclSuccess || !req) {
    free(o->send), free(o->recv);
    return;
  }
  o->req = req, o->live = true;
  nops++;
}

static void setup(uint8_t cfg) {
  cc = calloc(1, sizeof *cc);
  CHECK(cc);
  cc->magic = COLL_MAGIC;
  pthread_mutex_init(&cc->mu, NULL);
  nsrv = 1 + cfg % 3;
  cc->nservers = nsrv;
  cc->rank = (cfg >> 2) & 1;
  cc->nranks = 2;
  cc->hold = (cfg >> 3) & 1;
  cc->part_bytes = cfg & 0x10 ? 16384 : 65536;
  for (int i = 0; i < nsrv; i++) {
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    fcntl(sv[0], F_SETFL, O_NONBLOCK);
    fcntl(sv[1], F_SETFL, O_NONBLOCK);
    cc->srv[i].fd = sv[0];
    snprintf(cc->srv[i].name, sizeof cc->srv[i].name, "fuzz-ps-%d", i);
    memset(&hs[i], 0, sizeof hs[i]);
    hs[i].fd = sv[1];
  }
  nops = 0;
}

static void teardown(void) {
  ps_client_teardown(cc);
  for (int i = 0; i < nsrv; i++)
    if (!hs[i].closed) close(hs[i].fd);
  for (int k = 0; k < nops; k++) free(ops[k].send), free(ops[k].recv);
  pthread_mutex_destroy(&cc->mu);
  free(cc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  in_p = data, in_n = size;
  setup(rd8());
  while (in_n) {
    uint8_t op = rd8();
    int i = (op >> 4) % nsrv;
    switch (op % 6) {
      case 0: { /* iallreduce: up to 768 KiB of floats */
        uint8_t cls = rd8();
        uint32_t v = rd16();
        allreduce(cls % 3 == 0 ? v % 64 : cls % 3 == 1 ? v : v * 3u);
        break;
      }
      case 1:
      case 2: { /* a server replies */
        uint8_t kind = rd8(), sel = rd8(), mut = rd8(), cut = rd8();
        reply(i, kind, sel, mut, cut);
        break;
      }
      case 3: /* test() */
        drive();
        break;
      case 4: /* a server closes */
        if (!hs[i].closed) {
          close(hs[i].fd);
          hs[i].closed = true;
          drive();
        }
        break;
      default: /* the servers read */
        read_all();
        break;
    }
  }
  teardown();
  return 0;
}
