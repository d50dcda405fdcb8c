/*
 * tcp_pingpong.c - reference small-message latency program: plain TCP on
 * loopback.
 *
 * One invocation forks two processes, A (the parent, which listens) and
 * B (the child, which connects), joined by one TCP connection with
 * TCP_NODELAY on both ends.  A sends --size bytes, B receives them and
 * sends --size bytes back, A receives them: one round trip.  Both
 * receivers busy-poll with recv(MSG_DONTWAIT) (no blocking, no poll/epoll);
 * sends are plain blocking send() calls.
 *
 * A times every round trip with CLOCK_MONOTONIC, discards the first
 * --warmup ones, and reports the half round-trip time (RTT / 2) in
 * microseconds.  The last line of output is
 *   RESULT size=8 half_rtt_us_median=4.4 half_rtt_us_mean=4.6 ...
 *
 * --exchange: the shape of nccl-tests' sendrecv over NCCL's one-way connections instead: two
 * connections, one per direction; in every iteration both processes send, then spin until the
 * other's message has arrived.  Reports the iteration time:
 *   RESULT mode=exchange size=8 iter_us_median=... iter_us_mean=...
 *
 * Build: cc -O2 -std=c11 -Wall -Wextra -Werror -pthread tcp_pingpong.c -o tcp_pingpong
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static struct {
	size_t size;
	long iters;
	long warmup;
	const char *host;
	int port;         /* 0: ephemeral */
	unsigned timeout; /* seconds before both processes give up */
	int exchange;     /* two one-way connections, both sides send at once */
} opt = { 8, 100000, 10000, "127.0.0.1", 0, 120, 0 };

static void die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "tcp_pingpong: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	exit(1);
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: tcp_pingpong [options]\n"
		"Reference TCP ping-pong latency over loopback: forks two processes whose\n"
		"receivers busy-poll recv(MSG_DONTWAIT); TCP_NODELAY on both ends.\n"
		"\n"
		"  --size N      message size in bytes (default 8)\n"
		"  --iters N     timed round trips (default 100000)\n"
		"  --warmup N    untimed round trips first (default 10000)\n"
		"  --host H      address to listen on and connect to (default 127.0.0.1)\n"
		"  --port P      TCP port (default 0: any free port)\n"
		"  --timeout T   abort after T seconds (default 120)\n"
		"  --exchange    two one-way connections; both sides send each iteration (sendrecv)\n"
		"  --help        this text\n"
		"\n"
		"Reports half the round-trip time in microseconds.  The last line is\n"
		"machine-readable:\n"
		"  RESULT size=N half_rtt_us_median=X half_rtt_us_mean=Y half_rtt_us_min=..\n"
		"         half_rtt_us_p99=.. iters=..\n");
}

static long parse_long(const char *s, const char *what)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || end == s || *end != '\0' || v < 0)
		die("bad %s: %s", what, s);
	return v;
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void send_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			die("send: %s", strerror(errno));
		}
		p += w;
		n -= (size_t)w;
	}
}

/* Busy-poll until n bytes have arrived. */
static void spin_recv(int fd, char *p, size_t n)
{
	while (n > 0) {
		ssize_t r = recv(fd, p, n, MSG_DONTWAIT);
		if (r > 0) {
			p += r;
			n -= (size_t)r;
		} else if (r == 0) {
			die("recv: peer closed the connection");
		} else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
			die("recv: %s", strerror(errno));
		}
	}
}

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
	int one = 1;
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
	if (listen(fd, 1) < 0)
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

static int connect_to(int port)
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
	return fd;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

static void parse_args(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "size", required_argument, NULL, 's' },
		{ "iters", required_argument, NULL, 'n' },
		{ "warmup", required_argument, NULL, 'w' },
		{ "host", required_argument, NULL, 'H' },
		{ "port", required_argument, NULL, 'p' },
		{ "timeout", required_argument, NULL, 't' },
		{ "help", no_argument, NULL, 'h' },
		{ "exchange", no_argument, NULL, 'x' },
		{ NULL, 0, NULL, 0 },
	};
	int c;
	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (c) {
		case 's': opt.size = (size_t)parse_long(optarg, "--size"); break;
		case 'n': opt.iters = parse_long(optarg, "--iters"); break;
		case 'w': opt.warmup = parse_long(optarg, "--warmup"); break;
		case 'H': opt.host = optarg; break;
		case 'p': opt.port = (int)parse_long(optarg, "--port"); break;
		case 't': opt.timeout = (unsigned)parse_long(optarg, "--timeout"); break;
		case 'x': opt.exchange = 1; break;
		case 'h': usage(stdout); exit(0);
		default: usage(stderr); exit(2);
		}
	}
	if (optind != argc) {
		usage(stderr);
		exit(2);
	}
	if (opt.size == 0 || opt.iters < 1 || opt.port > 65535)
		die("bad arguments (see --help)");
}

int main(int argc, char **argv)
{
	parse_args(argc, argv);
	setvbuf(stdout, NULL, _IOLBF, 0);

	char *buf = malloc(opt.size);
	uint64_t *rtt = malloc((size_t)opt.iters * sizeof *rtt);
	if (!buf || !rtt)
		die("out of memory");
	memset(buf, 0x5a, opt.size);
	memset(rtt, 0, (size_t)opt.iters * sizeof *rtt);
	long total = opt.warmup + opt.iters;

	int port, lfd = listen_on(&port);
	pid_t pid = fork();
	if (pid < 0)
		die("fork: %s", strerror(errno));
	if (pid == 0) {
		/* Process B: echo every message back. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		alarm(opt.timeout);
		close(lfd);
		int fd = connect_to(port);
		set_nodelay(fd);
		if (opt.exchange) {
			int out = connect_to(port); /* B -> A */
			set_nodelay(out);
			for (long i = 0; i < total; i++) {
				send_all(out, buf, opt.size);
				spin_recv(fd, buf, opt.size);
			}
			_exit(0);
		}
		for (long i = 0; i < total; i++) {
			spin_recv(fd, buf, opt.size);
			send_all(fd, buf, opt.size);
		}
		_exit(0);
	}

	/* Process A: send, wait for the echo, time the round trip. */
	alarm(opt.timeout);
	int fd = accept(lfd, NULL, NULL);
	if (fd < 0)
		die("accept: %s", strerror(errno));
	int in = fd; /* the connection A receives on */
	if (opt.exchange && (in = accept(lfd, NULL, NULL)) < 0)
		die("accept: %s", strerror(errno));
	close(lfd);
	set_nodelay(fd);
	for (long i = 0; i < total; i++) {
		uint64_t t0 = now_ns();
		send_all(fd, buf, opt.size);
		spin_recv(in, buf, opt.size);
		if (i >= opt.warmup)
			rtt[i - opt.warmup] = now_ns() - t0;
	}
	int status;
	if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
		die("child process failed");

	double sum = 0;
	for (long i = 0; i < opt.iters; i++)
		sum += (double)rtt[i];
	qsort(rtt, (size_t)opt.iters, sizeof *rtt, cmp_u64);
	long n = opt.iters;
	double med = n % 2 ? (double)rtt[n / 2] : ((double)rtt[n / 2 - 1] + (double)rtt[n / 2]) / 2;
	/* half RTT in microseconds: ns / 2 / 1000 */
	double h_med = med / 2000.0, h_mean = sum / (double)n / 2000.0;
	double h_min = (double)rtt[0] / 2000.0, h_max = (double)rtt[n - 1] / 2000.0;
	double h_p99 = (double)rtt[(size_t)((double)(n - 1) * 0.99)] / 2000.0;

	if (opt.exchange) {
		/* each entry is one iteration (one message each way at once), not a round trip */
		printf("tcp_pingpong --exchange: size=%zu iters=%ld: iteration us min %.2f median %.2f "
		       "mean %.2f\n", opt.size, opt.iters, h_min * 2, h_med * 2, h_mean * 2);
		printf("RESULT mode=exchange size=%zu iter_us_median=%.2f iter_us_mean=%.2f iters=%ld\n",
		       opt.size, h_med * 2, h_mean * 2, opt.iters);
		return 0;
	}
	printf("tcp_pingpong: host=%s port=%d size=%zu iters=%ld warmup=%ld\n", opt.host, port,
	       opt.size, opt.iters, opt.warmup);
	printf("half RTT us: min %.2f  median %.2f  mean %.2f  p99 %.2f  max %.2f\n", h_min, h_med,
	       h_mean, h_p99, h_max);
	printf("RESULT size=%zu half_rtt_us_median=%.2f half_rtt_us_mean=%.2f half_rtt_us_min=%.2f "
	       "half_rtt_us_p99=%.2f iters=%ld\n",
	       opt.size, h_med, h_mean, h_min, h_p99, opt.iters);
	return 0;
}
