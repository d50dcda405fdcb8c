/* Socket set-up shared by listen, connect and accept. */
#ifndef BRAID_SOCK_H
#define BRAID_SOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "topo/ifaces.h"

/* A non-blocking TCP socket of the interface's family, bound to the interface (device and
 * address) so its traffic leaves by that NIC even when NICs share a subnet.  -1 on error. */
int braid_sock_open(const struct braid_iface *ifc);
/* The traffic class byte tc (0..255) on fd: IP_TOS, or IPV6_TCLASS on an IPv6 socket, so
 * everything the socket sends (its SYN or SYN-ACK too when set before connect or accept answers)
 * is marked; a negative tc leaves the system's default.  -1 with a WARN (once) when the kernel
 * refuses. */
int braid_sock_set_class(int fd, int tc);
/* Data-socket options: no Nagle, keepalive and a user timeout derived from BRAID_TIMEOUT_MS. */
void braid_sock_tune(int fd);
/* TCP user timeout and keepalive probes (a third of it apart, 3 of them) so a dead path or a
 * silent peer host fails the socket after about timeout_ms; braid_sock_tune uses
 * BRAID_TIMEOUT_MS. */
void braid_sock_set_timeout(int fd, int64_t timeout_ms);
/* A non-blocking connect: 1 connected, 0 still in progress, -1 failed (errno says why). */
int braid_sock_connected(int fd);
/* A set-up socket that must stay open and silent (ofi and verbs carry data elsewhere): 1 while
 * it does; BRAID_SOCK_CLOSED with the reason in why when the peer closed it or reset it (its
 * process closed the connection or ended: what it sent on the data path before may still be on
 * its way there); -1 with the reason when it sent bytes other than pokes on it, or the socket
 * failed otherwise.  Pokes are read and dropped. */
#define BRAID_SOCK_CLOSED (-2)
int braid_sock_silent(int fd, char *why, size_t whylen);
/* A poke: one byte on a set-up socket, which the peer's braid_sock_silent drops.  The peer's
 * kernel acknowledges it whether or not the peer's application is busy, so a poke that stays
 * unacknowledged while TCP retransmits it shows a dead path (ofi_tx.c).  0 when sent, 1 when one
 * is still unacknowledged (none sent), -1 when the socket failed (errno says why). */
int braid_sock_poke(int fd);
/* Whether the socket has data the peer's kernel has not acknowledged and TCP's retransmission
 * timer has fired for it (or TCP_INFO cannot be read). */
bool braid_sock_retransmitting(int fd);
/* A short unsent queue (TCP_NOTSENT_LOWAT), so a slow rail's backlog stays short in time. */
void braid_sock_short_queue(int fd);
/* Random bytes for secrets, nonces and ids from the kernel; -1 with a WARN when none are
 * available (callers fail: there is no weaker fallback). */
int braid_random(void *buf, size_t len);
/* Where braid_random's bytes come from: 0 or -1 (errno set).  A test hook. */
extern int (*braid_random_source)(void *buf, size_t len);

#endif
