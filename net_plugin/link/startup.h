/* A link's start-up, the same for every transport that needs one (libfabric endpoints, verbs
 * queue pairs): once the set-up socket's handshake has authenticated the connection, each end
 * sends its endpoint addresses on that socket in one message and reads the peer's; then the
 * socket stays open, silent, for the link's life, and its closing (the peer closed its end, or
 * its process is gone and its kernel closed the socket) is how an end learns that the link is
 * gone.  The socket is not the link: what the peer sent over the link before it closed may still
 * be arriving when the closing shows, so the transport decides what a closed link means.
 *
 *   SENT --peer's message complete--> the transport connects --> LINKED --socket closed--> CLOSED
 *     \--no message in BRAID_TIMEOUT_MS, socket closed, garbled message--> BROKEN
 *
 * The message formats are the transports' own (net_plugin/wire/); this module only needs to know,
 * from the bytes so far, how long the whole message is. */
#ifndef BRAID_LINK_STARTUP_H
#define BRAID_LINK_STARTUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "transport/socket/sock.h" /* BRAID_SOCK_CLOSED */

#define BRAID_LINK_MSG_MAX 512

/* How many bytes the whole message has, from its first got bytes (got >= the header's length):
 * -1 (with why) for a malformed message. */
typedef ssize_t (*braid_link_need_fn)(const uint8_t *msg, size_t got, const void *arg, char *why,
                                      size_t whylen);

struct braid_link_startup {
  uint8_t msg[BRAID_LINK_MSG_MAX]; /* the peer's message as it arrives */
  size_t got;
  bool linked;
  uint64_t at_ns; /* when the start-up began (the timeout's origin), then the last socket check */
};

/* Sends this end's message (at most BRAID_LINK_MSG_MAX bytes) on fd and starts l.  A few hundred
 * bytes into a fresh socket's empty buffer: all or nothing.  0, or -1 with errno set. */
int braid_link_begin(struct braid_link_startup *l, int fd, const void *msg, size_t len, uint64_t now);

/* Reads what fd has of the peer's message: 1 when it is complete in l->msg (l->got bytes: the
 * transport connects, then calls braid_link_up; hdr: the length of the message's header, which
 * need reads), 0 not yet, -1 broken (why says how: the peer
 * closed the socket, a malformed message, or none within timeout_ns of the start, where what
 * names the message).  Once linked, checked at most every check_ns: 1; BRAID_LINK_CLOSED when the
 * peer closed (or reset) the socket, which it does once it has closed its end of the link: what
 * it sent over the link before may still be arriving, and the transport collects it before it
 * decides whether anything was cut short; -1 when the socket failed otherwise. */
#define BRAID_LINK_CLOSED BRAID_SOCK_CLOSED
int braid_link_poll(struct braid_link_startup *l, int fd, uint64_t now, uint64_t timeout_ns, uint64_t check_ns,
                    size_t hdr, braid_link_need_fn need, const void *arg, const char *what, char *why,
                    size_t whylen);

void braid_link_up(struct braid_link_startup *l, uint64_t now);

#endif
