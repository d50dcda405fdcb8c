/*
 * tcp_stream.c - reference bulk-throughput program: plain TCP on loopback.
 *
 * One invocation forks two processes, A (the parent, which listens) and
 * B (the child, which connects):
 *
 *   oneway: A writes blocks with blocking write() on one connection,
 *           B reads them with blocking read().
 *   bidir:  two connections, one per direction (like NCCL's unidirectional
 *           send/recv comms).  Each process runs one thread per direction:
 *           a sender thread on one connection and a receiver thread on the
 *           other.
 *
 * The stream is cut into phases.  A phase is an 8-byte big-endian length
 * header followed by that many payload bytes (written in --block sized
 * write() calls); the receiver answers each phase with a 1-byte ack.  The
 * sender times a phase from its first write() until the ack arrives, so a
 * phase's time covers delivery of every byte to the reading application.
 * A zero-length header ends the stream.
 *
 * Phases: a 64 MiB warm-up, then (if --warmup > 0) a warm-up sized from the
 * first one's rate to last about --warmup seconds, then --repeat measured
 * phases of --bytes each, or, without --bytes, sized from the last warm-up's
 * rate to last about --seconds each.  In bidir mode the two senders agree on
 * one phase size (the mean of their estimates, exchanged over pipes), and
 * the two threads of each process meet at a barrier after every phase, so
 * both directions run their phases in lockstep and overlap fully.
 *
 * CPU per GB moved: each process's user + system CPU time (getrusage
 * RUSAGE_SELF, both its threads) from the start of its first measured phase
 * to the end of its last, both processes summed, over the payload bytes sent
 * in the measured phases (both directions in bidir mode); the same figure
 * braid-perf prints.  Its thread that sends (or, in B one way, the receiver)
 * takes the readings.
 *
 * GB/s means 1e9 bytes per second.  The last line of output is
 *   RESULT mode=oneway block=1048576 gbps_median=4.53 gbps_best=4.80 ...
 *
 * Build: cc -O2 -std=c11 -Wall -Wextra -Werror -pthread tcp_stream.c -o tcp_stream
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_REPEAT 1000
#define WARMUP1_BYTES (64ull << 20)

static struct {
	uint64_t bytes;   /* bytes per measured phase; 0: size from --seconds */
	size_t block;     /* bytes per write() */
	double seconds;   /* target duration of a measured phase */
	double warmup;    /* target duration of the second warm-up phase */
	int repeat;
	int bidir;
	const char *host;
	int port;         /* 0: ephemeral */
	unsigned timeout; /* seconds before both processes give up */
} opt = { 0, 1u << 20, 2.0, 0.5, 3, 0, "127.0.0.1", 0, 120 };

/* bidir only: pipes to agree with the other process's sender on a phase size */
static int xchg_rd = -1, xchg_wr = -1;

static void die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "tcp_stream: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	exit(1);
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: tcp_stream [options]\n"
		"Reference TCP throughput over loopback: forks a writer and a reader process.\n"
		"\n"
		"  --block N     bytes per blocking write() (default 1048576)\n"
		"  --bytes N     bytes per measured repetition (default: sized to --seconds)\n"
		"  --seconds S   target seconds per measured repetition (default 2)\n"
		"  --warmup S    target seconds of warm-up after a 64 MiB warm-up (default 0.5)\n"
		"  --repeat R    measured repetitions (default 3, max %d)\n"
		"  --bidir       both directions at once: one connection and one thread\n"
		"                per direction in each process\n"
		"  --host H      address to listen on and connect to (default 127.0.0.1)\n"
		"  --port P      TCP port (default 0: any free port)\n"
		"  --timeout T   abort after T seconds (default 120)\n"
		"  --help        this text\n"
		"\n"
		"Sizes accept a K, M or G suffix (powers of 1024).  GB/s = 1e9 bytes/s.\n"
		"The last line is machine-readable:\n"
		"  RESULT mode=oneway block=B gbps_median=X gbps_best=Y\n"
		"  RESULT mode=bidir block=B gbps_median=X gbps_best=Y ab_gbps_median=..\n"
		"         ba_gbps_median=.. sum_gbps_median=..\n"
		"In bidir mode gbps_* are per direction (mean of the two directions\n"
		"in each repetition); ab is A->B, ba is B->A, sum is both together.\n",
		MAX_REPEAT);
}

static uint64_t parse_size(const char *s, const char *what)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s)
		die("bad %s: %s", what, s);
	switch (*end) {
	case 'k': case 'K': v <<= 10; end++; break;
	case 'm': case 'M': v <<= 20; end++; break;
	case 'g': case 'G': v <<= 30; end++; break;
	default: break;
	}
	if (*end != '\0')
		die("bad %s: %s", what, s);
	return v;
}

static double parse_double(const char *s, const char *what)
{
	char *end;
	double v = strtod(s, &end);
	if (end == s || *end != '\0' || v < 0)
		die("bad %s: %s", what, s);
	return v;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void write_all(int fd, const void *buf, size_t n)
{
	const char *p = buf;
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			die("write: %s", strerror(errno));
		}
		p += w;
		n -= (size_t)w;
	}
}

static void read_all(int fd, void *buf, size_t n)
{
	char *p = buf;
	while (n > 0) {
		ssize_t r = read(fd, p, n);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			die("read: %s", strerror(errno));
		}
		if (r == 0)
			die("read: peer closed the connection");
		p += r;
		n -= (size_t)r;
	}
}

/* Round up to a whole number of blocks, at least one. */
static uint64_t whole_blocks(double bytes)
{
	uint64_t b = opt.block;
	uint64_t n = bytes < (double)b ? 1 : (uint64_t)(bytes / (double)b);
	if ((double)(n * b) < bytes)
		n++;
	return n * b;
}

/* This process's CPU seconds at the start and end of the measured phases:
 * user, system. */
static double cpu_start[2], cpu_end[2];

static void cpu_now(double *at)
{
	struct rusage ru;
	if (getrusage(RUSAGE_SELF, &ru) < 0)
		die("getrusage: %s", strerror(errno));
	at[0] = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6;
	at[1] = (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

/* ---- one direction: sender and receiver sides ---- */

struct dir {
	int fd;
	char *buf;                 /* opt.block bytes */
	pthread_barrier_t *barrier; /* bidir only: meet the other thread */
	int cpu_owner;             /* this thread reads the process's CPU time */
	uint64_t phase_bytes;      /* sender: bytes per measured phase */
	double gbps[MAX_REPEAT];   /* sender: measured rates */
};

static void phase_done(struct dir *d)
{
	if (d->barrier)
		pthread_barrier_wait(d->barrier);
}

/* Send one phase of n bytes; return seconds until the receiver's ack. */
static double send_phase(struct dir *d, uint64_t n)
{
	uint64_t hdr = htobe64(n);
	char ack;
	double t0 = now();
	write_all(d->fd, &hdr, sizeof hdr);
	for (uint64_t left = n; left > 0;) {
		size_t c = left < opt.block ? (size_t)left : opt.block;
		write_all(d->fd, d->buf, c);
		left -= c;
	}
	read_all(d->fd, &ack, 1);
	return now() - t0;
}

static void *sender(void *arg)
{
	struct dir *d = arg;
	uint64_t n = whole_blocks((double)WARMUP1_BYTES);
	double t = send_phase(d, n);
	phase_done(d);
	double rate = (double)n / t;
	if (opt.warmup > 0) {
		n = whole_blocks(rate * opt.warmup);
		t = send_phase(d, n);
		phase_done(d);
		rate = (double)n / t;
	}
	n = opt.bytes ? whole_blocks((double)opt.bytes) : whole_blocks(rate * opt.seconds);
	if (xchg_wr >= 0) {
		uint64_t peer;
		write_all(xchg_wr, &n, sizeof n);
		read_all(xchg_rd, &peer, sizeof peer);
		n = whole_blocks(((double)n + (double)peer) / 2);
	}
	d->phase_bytes = n;
	if (d->cpu_owner)
		cpu_now(cpu_start);
	for (int r = 0; r < opt.repeat; r++) {
		t = send_phase(d, n);
		phase_done(d);
		d->gbps[r] = (double)n / t / 1e9;
	}
	if (d->cpu_owner)
		cpu_now(cpu_end);
	uint64_t end = 0;
	write_all(d->fd, &end, sizeof end);
	return NULL;
}

static void *receiver(void *arg)
{
	struct dir *d = arg;
	const int first = opt.warmup > 0 ? 2 : 1; /* the first measured phase */
	for (int phase = 0;; phase++) {
		uint64_t n;
		read_all(d->fd, &n, sizeof n);
		n = be64toh(n);
		if (n == 0)
			return NULL;
		if (d->cpu_owner && phase == first)
			cpu_now(cpu_start);
		while (n > 0) {
			size_t want = n < opt.block ? (size_t)n : opt.block;
			ssize_t r = read(d->fd, d->buf, want);
			if (r < 0) {
				if (errno == EINTR)
					continue;
				die("read: %s", strerror(errno));
			}
			if (r == 0)
				die("read: peer closed the connection");
			n -= (uint64_t)r;
		}
		write_all(d->fd, "a", 1);
		if (d->cpu_owner && phase == first + opt.repeat - 1)
			cpu_now(cpu_end);
		phase_done(d);
	}
}

static struct dir *new_dir(int fd, pthread_barrier_t *barrier)
{
	struct dir *d = calloc(1, sizeof *d);
	if (!d || !(d->buf = malloc(opt.block)))
		die("out of memory");
	memset(d->buf, 0x5a, opt.block); /* fault the pages in */
	d->fd = fd;
	d->barrier = barrier;
	return d;
}

/* Run this process's side: send on send_fd and/or receive on recv_fd (-1: none).
 * Returns the sender's direction (NULL if this process does not send). */
static struct dir *run_side(int send_fd, int recv_fd)
{
	static pthread_barrier_t barrier;
	pthread_barrier_t *b = NULL;
	if (send_fd >= 0 && recv_fd >= 0) {
		pthread_barrier_init(&barrier, NULL, 2);
		b = &barrier;
	}
	struct dir *s = send_fd >= 0 ? new_dir(send_fd, b) : NULL;
	struct dir *r = recv_fd >= 0 ? new_dir(recv_fd, b) : NULL;
	if (s)
		s->cpu_owner = 1;
	else if (r)
		r->cpu_owner = 1;
	pthread_t ts, tr;
	int e;
	if (s && (e = pthread_create(&ts, NULL, sender, s)) != 0)
		die("pthread_create: %s", strerror(e));
	if (r && (e = pthread_create(&tr, NULL, receiver, r)) != 0)
		die("pthread_create: %s", strerror(e));
	if (s)
		pthread_join(ts, NULL);
	if (r)
		pthread_join(tr, NULL);
	return s;
}

/* ---- connection setup ---- */

static struct addrinfo *resolve(const char *port, int passive)
{
	struct addrinfo hints = { 0 }, *ai;
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = passive ? AI_PASSIVE : 0;
	int e = getaddrinfo(opt.host, port, &hints, &ai);
	if (e)
		die("getaddrinfo %s: %s", opt.host, gai_strerror(e));
	return ai;
}

static void set_nodelay(int fd)
{
	int one = 1; /* only the small header and ack care; bulk data does not */
	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) < 0)
		die("TCP_NODELAY: %s", strerror(errno));
}

static int listen_on(int *port_out)
{
	char port[16];
	snprintf(port, sizeof port, "%d", opt.port);
	struct addrinfo *ai = resolve(port, 1);
	int fd = socket(ai->ai_family, SOCK_STREAM, 0);
	int one = 1;
	if (fd < 0)
		die("socket: %s", strerror(errno));
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0)
		die("bind %s:%s: %s", opt.host, port, strerror(errno));
	if (listen(fd, 4) < 0)
		die("listen: %s", strerror(errno));
	freeaddrinfo(ai);
	struct sockaddr_storage ss;
	socklen_t len = sizeof ss;
	if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
		die("getsockname: %s", strerror(errno));
	*port_out = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
						   : ((struct sockaddr_in *)&ss)->sin_port);
	return fd;
}

/* Connect and tag the connection with its id byte. */
static int connect_to(int port, char id)
{
	char p[16];
	snprintf(p, sizeof p, "%d", port);
	struct addrinfo *ai = resolve(p, 0);
	int fd = socket(ai->ai_family, SOCK_STREAM, 0);
	if (fd < 0)
		die("socket: %s", strerror(errno));
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0)
		die("connect %s:%s: %s", opt.host, p, strerror(errno));
	freeaddrinfo(ai);
	set_nodelay(fd);
	write_all(fd, &id, 1);
	return fd;
}

/* Accept n connections; conns[id] receives the connection tagged id. */
static void accept_conns(int lfd, int *conns, int n)
{
	for (int i = 0; i < n; i++) {
		int fd = accept(lfd, NULL, NULL);
		unsigned char id;
		if (fd < 0)
			die("accept: %s", strerror(errno));
		set_nodelay(fd);
		read_all(fd, &id, 1);
		if (id >= n || conns[id] >= 0)
			die("unexpected connection id %d", id);
		conns[id] = fd;
	}
}

/* ---- statistics ---- */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double median(const double *v, int n)
{
	double s[MAX_REPEAT];
	memcpy(s, v, (size_t)n * sizeof *v);
	qsort(s, (size_t)n, sizeof *s, cmp_double);
	return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

static double best(const double *v, int n)
{
	double m = v[0];
	for (int i = 1; i < n; i++)
		if (v[i] > m)
			m = v[i];
	return m;
}

/* ---- main ---- */

static void parse_args(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "block", required_argument, NULL, 'b' },
		{ "bytes", required_argument, NULL, 'n' },
		{ "seconds", required_argument, NULL, 's' },
		{ "warmup", required_argument, NULL, 'w' },
		{ "repeat", required_argument, NULL, 'r' },
		{ "bidir", no_argument, NULL, 'd' },
		{ "host", required_argument, NULL, 'H' },
		{ "port", required_argument, NULL, 'p' },
		{ "timeout", required_argument, NULL, 't' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;
	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (c) {
		case 'b': opt.block = (size_t)parse_size(optarg, "--block"); break;
		case 'n': opt.bytes = parse_size(optarg, "--bytes"); break;
		case 's': opt.seconds = parse_double(optarg, "--seconds"); break;
		case 'w': opt.warmup = parse_double(optarg, "--warmup"); break;
		case 'r': opt.repeat = (int)parse_size(optarg, "--repeat"); break;
		case 'd': opt.bidir = 1; break;
		case 'H': opt.host = optarg; break;
		case 'p': opt.port = (int)parse_size(optarg, "--port"); break;
		case 't': opt.timeout = (unsigned)parse_size(optarg, "--timeout"); break;
		case 'h': usage(stdout); exit(0);
		default: usage(stderr); exit(2);
		}
	}
	if (optind != argc) {
		usage(stderr);
		exit(2);
	}
	if (opt.block == 0 || opt.repeat < 1 || opt.repeat > MAX_REPEAT || opt.port > 65535 ||
	    (opt.bytes == 0 && opt.seconds <= 0))
		die("bad arguments (see --help)");
}

int main(int argc, char **argv)
{
	parse_args(argc, argv);
	setvbuf(stdout, NULL, _IOLBF, 0);

	int port, lfd = listen_on(&port);
	int pfd[2], qfd[2]; /* bidir: B -> A and A -> B: phase size; B -> A: B's results */
	if (pipe(pfd) < 0 || pipe(qfd) < 0)
		die("pipe: %s", strerror(errno));
	pid_t pid = fork();
	if (pid < 0)
		die("fork: %s", strerror(errno));
	if (pid == 0) {
		/* Process B: connects; receives on conn 0, sends on conn 1 (bidir). */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		alarm(opt.timeout);
		close(lfd);
		close(pfd[0]);
		close(qfd[1]);
		if (opt.bidir) {
			xchg_wr = pfd[1];
			xchg_rd = qfd[0];
		}
		int c0 = connect_to(port, 0);
		int c1 = opt.bidir ? connect_to(port, 1) : -1;
		struct dir *s = run_side(c1, c0);
		if (s) {
			write_all(pfd[1], &s->phase_bytes, sizeof s->phase_bytes);
			write_all(pfd[1], s->gbps, (size_t)opt.repeat * sizeof s->gbps[0]);
		}
		double cpu[2] = { cpu_end[0] - cpu_start[0], cpu_end[1] - cpu_start[1] };
		write_all(pfd[1], cpu, sizeof cpu);
		_exit(0);
	}

	/* Process A: accepts; sends on conn 0, receives on conn 1 (bidir). */
	alarm(opt.timeout);
	close(pfd[1]);
	close(qfd[0]);
	if (opt.bidir) {
		xchg_wr = qfd[1];
		xchg_rd = pfd[0];
	}
	int conns[2] = { -1, -1 };
	accept_conns(lfd, conns, opt.bidir ? 2 : 1);
	close(lfd);
	printf("tcp_stream: mode=%s host=%s port=%d block=%zu repeat=%d %s\n",
	       opt.bidir ? "bidir" : "oneway", opt.host, port, opt.block, opt.repeat,
	       opt.bytes ? "(fixed bytes)" : "(bytes sized to --seconds)");
	struct dir *ab = run_side(conns[0], conns[1]);

	double ba[MAX_REPEAT];
	uint64_t ba_bytes = 0;
	if (opt.bidir) {
		read_all(pfd[0], &ba_bytes, sizeof ba_bytes);
		read_all(pfd[0], ba, (size_t)opt.repeat * sizeof ba[0]);
	}
	double cpu_b[2], cpu_a[2] = { cpu_end[0] - cpu_start[0], cpu_end[1] - cpu_start[1] };
	read_all(pfd[0], cpu_b, sizeof cpu_b);
	int status;
	if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
		die("child process failed");

	/* payload bytes sent in the measured phases, both directions */
	double gb = ((double)ab->phase_bytes + (double)ba_bytes) * opt.repeat / 1e9;
	double cpu_gb = (cpu_a[0] + cpu_a[1] + cpu_b[0] + cpu_b[1]) / gb;
	printf("CPU per GB moved: %.4f s (user %.4f + sys %.4f; process A %.4f, process B %.4f; "
	       "%.3f GB)\n", cpu_gb, (cpu_a[0] + cpu_b[0]) / gb, (cpu_a[1] + cpu_b[1]) / gb,
	       (cpu_a[0] + cpu_a[1]) / gb, (cpu_b[0] + cpu_b[1]) / gb, gb);
	if (!opt.bidir) {
		for (int r = 0; r < opt.repeat; r++)
			printf("rep %d: %.3f GB/s (%llu bytes)\n", r + 1, ab->gbps[r],
			       (unsigned long long)ab->phase_bytes);
		printf("RESULT mode=oneway block=%zu gbps_median=%.3f gbps_best=%.3f "
		       "cpu_s_per_GB=%.4f\n", opt.block, median(ab->gbps, opt.repeat),
		       best(ab->gbps, opt.repeat), cpu_gb);
		return 0;
	}
	double per_dir[MAX_REPEAT], sum[MAX_REPEAT];
	for (int r = 0; r < opt.repeat; r++) {
		sum[r] = ab->gbps[r] + ba[r];
		per_dir[r] = sum[r] / 2;
		printf("rep %d: A->B %.3f GB/s (%llu bytes)  B->A %.3f GB/s (%llu bytes)  sum %.3f GB/s\n",
		       r + 1, ab->gbps[r], (unsigned long long)ab->phase_bytes, ba[r],
		       (unsigned long long)ba_bytes, sum[r]);
	}
	printf("RESULT mode=bidir block=%zu gbps_median=%.3f gbps_best=%.3f ab_gbps_median=%.3f "
	       "ba_gbps_median=%.3f sum_gbps_median=%.3f cpu_s_per_GB=%.4f\n",
	       opt.block, median(per_dir, opt.repeat), best(per_dir, opt.repeat),
	       median(ab->gbps, opt.repeat), median(ba, opt.repeat), median(sum, opt.repeat), cpu_gb);
	return 0;
}
