// SPDX-License-Identifier: GPL-2.0
/*
 * mplab-delayline: harness/emulation/delayline.py in C, with the same command line, the same readiness line
 * and the same stats line. A TUN device's packets are held for the delay of their IPv4 destination, one
 * FIFO per delay value (order kept; --jitter adds a uniform extra without reordering), and written back.
 *
 * Why C: at a speed-up the Python line spent 5-8 CPU s of user time per emulated GB on its own work
 * (bench/speedup_cpu.py); here a packet costs its two system calls and a malloc. Reads drain the device in
 * bursts of up to BURST packets per wake-up and every due packet is written before the next wait (ppoll:
 * nanosecond timeouts).
 *
 *   mplab-delayline --dev dly0 [--rt-priority 10] [--jitter MS] --delay 10.10.1.2=15 [--delay ...]
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#define BURST 64
#define MAX_DELAYS 256
#define MTU_MAX 65536

struct pkt {
	struct pkt *next;
	uint64_t due_ns;
	uint32_t len;
	unsigned char data[];
};

struct fifo {
	uint64_t delay_ns;
	struct pkt *head, *tail;
};

struct dest {
	uint32_t addr; /* network order */
	int fifo;
};

static struct fifo fifos[MAX_DELAYS];
static struct dest dests[MAX_DELAYS];
static int nfifos, ndests;
static volatile sig_atomic_t running = 1;
static unsigned long long n_packets, n_undelayed, n_dropped;
static double late_max_ms;
static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

static void on_signal(int sig) { (void)sig; running = 0; }

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static double uniform(void) /* [0, 1): xorshift64* */
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return (double)((rng_state * 2685821657736338717ULL) >> 11) / 9007199254740992.0;
}

static int usage(const char *why)
{
	fprintf(stderr, "mplab-delayline: %s\nusage: mplab-delayline --dev DEV [--rt-priority N] [--jitter MS] "
		"--delay A.B.C.D=MS ...\n", why);
	return 2;
}

static int add_delay(const char *arg)
{
	char ip[64];
	const char *eq = strchr(arg, '=');
	struct in_addr a;
	double ms;
	char *end;
	uint64_t ns;
	int f;

	if (!eq || eq - arg >= (long)sizeof(ip) || ndests >= MAX_DELAYS)
		return -1;
	memcpy(ip, arg, eq - arg);
	ip[eq - arg] = 0;
	ms = strtod(eq + 1, &end);
	if (inet_pton(AF_INET, ip, &a) != 1 || *end || !(ms >= 0))
		return -1;
	ns = (uint64_t)(ms * 1e6 + 0.5);
	for (f = 0; f < nfifos && fifos[f].delay_ns != ns; f++)
		;
	if (f == nfifos)
		fifos[nfifos++].delay_ns = ns;
	dests[ndests].addr = a.s_addr;
	dests[ndests++].fifo = f;
	return 0;
}

static int open_tun(const char *name)
{
	struct ifreq ifr = {0};
	int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);

	if (fd < 0)
		return -1;
	ifr.ifr_flags = IFF_TUN | IFF_NO_PI;
	strncpy(ifr.ifr_name, name, IFNAMSIZ - 1);
	if (ioctl(fd, TUNSETIFF, &ifr) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static void write_packet(int fd, const unsigned char *data, uint32_t len)
{
	if (write(fd, data, len) < 0) {
		if (errno != EAGAIN && errno != ENOBUFS) {
			perror("mplab-delayline: write");
			running = 0;
		}
		n_dropped++;
	}
}

static int fifo_of(const unsigned char *p, ssize_t len)
{
	uint32_t dst;
	int i;

	if (len < 20 || (p[0] >> 4) != 4)
		return -1;
	memcpy(&dst, p + 16, 4);
	for (i = 0; i < ndests; i++)
		if (dests[i].addr == dst)
			return fifos[dests[i].fifo].delay_ns ? dests[i].fifo : -1;
	return -1;
}

static void read_burst(int fd, uint64_t now, double jitter_ns, unsigned char *buf)
{
	for (int i = 0; i < BURST; i++) {
		ssize_t len = read(fd, buf, MTU_MAX);
		struct pkt *p;
		struct fifo *q;
		int f;

		if (len < 0)
			return; /* EAGAIN: drained */
		f = fifo_of(buf, len);
		if (f < 0) {
			write_packet(fd, buf, len);
			n_undelayed++;
			continue;
		}
		q = &fifos[f];
		p = malloc(sizeof(*p) + len);
		if (!p) {
			n_dropped++;
			continue;
		}
		p->next = NULL;
		p->len = len;
		p->due_ns = now + q->delay_ns;
		if (jitter_ns > 0) {
			p->due_ns += (uint64_t)(jitter_ns * uniform());
			if (q->tail && q->tail->due_ns > p->due_ns)
				p->due_ns = q->tail->due_ns; /* behind the packet ahead: order is kept */
		}
		memcpy(p->data, buf, len);
		if (q->tail)
			q->tail->next = p;
		else
			q->head = p;
		q->tail = p;
	}
}

/* Write every due packet; return when the next one is due (0: nothing held). */
static uint64_t release(int fd, uint64_t now)
{
	uint64_t next = 0;

	for (int f = 0; f < nfifos; f++) {
		struct fifo *q = &fifos[f];

		while (q->head && q->head->due_ns <= now) {
			struct pkt *p = q->head;
			double late = (now - p->due_ns) / 1e6;

			write_packet(fd, p->data, p->len);
			n_packets++;
			if (late > late_max_ms)
				late_max_ms = late;
			q->head = p->next;
			if (!q->head)
				q->tail = NULL;
			free(p);
		}
		if (q->head && (!next || q->head->due_ns < next))
			next = q->head->due_ns;
	}
	return next;
}

int main(int argc, char **argv)
{
	const char *dev = "dly0";
	int rt_priority = 0, fd;
	double jitter_ms = 0;
	unsigned char *buf;
	uint64_t next = 0;
	struct sigaction sa = {0};

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		char *end;

		if (!v)
			return usage("every option takes a value");
		if (!strcmp(a, "--dev"))
			dev = v;
		else if (!strcmp(a, "--rt-priority"))
			rt_priority = atoi(v);
		else if (!strcmp(a, "--jitter")) {
			jitter_ms = strtod(v, &end);
			if (*end || !(jitter_ms >= 0 && jitter_ms < 1000))
				return usage("--jitter must be 0 to 1000 ms");
		} else if (!strcmp(a, "--delay")) {
			if (add_delay(v))
				return usage("--delay wants destination=milliseconds");
		} else
			return usage("unknown option");
		i++;
	}
	if (rt_priority > 0) {
		/* As the Python line: normal priority on a loaded machine left packets up to 90-300 ms late. */
		struct sched_param sp = {.sched_priority = rt_priority};

		if (sched_setscheduler(0, SCHED_FIFO, &sp) < 0)
			perror("mplab-delayline: sched_setscheduler");
	}
	fd = open_tun(dev);
	if (fd < 0) {
		perror("mplab-delayline: attaching to the TUN device");
		return 1;
	}
	buf = malloc(MTU_MAX);
	if (!buf)
		return 1;
	sa.sa_handler = on_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	rng_state ^= now_ns();
	printf("delayline ready\n");
	fflush(stdout);
	while (running) {
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		uint64_t now = now_ns();
		struct timespec ts;
		uint64_t wait = next ? (next > now ? next - now : 0) : 500000000ULL;
		int n;

		ts.tv_sec = wait / 1000000000ULL;
		ts.tv_nsec = wait % 1000000000ULL;
		n = ppoll(&pfd, 1, &ts, NULL);
		if (n < 0 && errno != EINTR) {
			perror("mplab-delayline: ppoll");
			break;
		}
		now = now_ns();
		if (n > 0 && (pfd.revents & POLLIN))
			read_burst(fd, now, jitter_ms * 1e6, buf);
		next = release(fd, now);
	}
	fprintf(stderr, "delayline stats {'packets': %llu, 'passed_undelayed': %llu, 'dropped_write': %llu, "
		"'late_max_ms': %g}\n", n_packets, n_undelayed, n_dropped, late_max_ms);
	return 0;
}
