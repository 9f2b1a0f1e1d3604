/* SPDX-License-Identifier: GPL-2.0 */
/*
 * mplab: what every coupled struct_ops congestion control shares.
 *
 * Coupling: upstream MPTCP gives a congestion control no view of the other subflows,
 * so each program keeps a hash map keyed by the owning MPTCP socket (`conn` of the
 * subflow context behind icsk_ulp_data) whose value holds every subflow's window and
 * RTT in a slot. A subflow claims a slot the first time it has an RTT, refreshes it
 * on each ACK, and frees it in .release; the last one out deletes the entry, so the
 * map holds exactly the live coupled connections.
 *
 * A socket that is not an MPTCP subflow (plain TCP) gets Reno: the kernel's own
 * tcp_reno_* kfuncs.
 *
 * The skeleton (end of this file) is what the four algorithms share: the map, .init,
 * .release, Reno's .ssthresh and .undo_cwnd, the attach-or-Reno start of .cong_avoid,
 * and the whole .cong_avoid of the linked-increase algorithms (LIA, BALIA). Each
 * <algorithm>.bpf.c keeps only what is its own; the arithmetic is in mplab_math.h.
 */
#ifndef MPLAB_CC_H
#define MPLAB_CC_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>
#include "mplab_math.h"

char _license[] SEC("license") = "GPL";

#define MPLAB_MAX_CONNS 4096

/* Per-socket state in icsk_ca_priv (104 bytes available). slot is index+1 (0: none). */
struct mplab_ca {
	__u64 conn;
	__u32 slot;
	__s32 cnt;          /* OLIA: fractional window, 2^-10 packets */
	__u32 loss1, loss2, loss3;  /* OLIA: snd_una at the last losses and now */
	/* wVegas */
	__u32 beg_snd_nxt;
	struct wvegas_state wv;
};

extern void *bpf_rdonly_cast(const void *obj, __u32 btf_id) __ksym;
extern void tcp_reno_cong_avoid(struct sock *sk, __u32 ack, __u32 acked) __ksym;
extern __u32 tcp_reno_ssthresh(struct sock *sk) __ksym;
extern __u32 tcp_reno_undo_cwnd(struct sock *sk) __ksym;
extern __u32 tcp_slow_start(struct tcp_sock *tp, __u32 acked) __ksym;
extern void tcp_cong_avoid_ai(struct tcp_sock *tp, __u32 w, __u32 acked) __ksym;

#define TCP_CA_Open 0
#define TCP_CA_CWR 2
#define TCP_CA_Recovery 3
#define TCP_CA_Loss 4

#define MPLAB_CONN_MAP(NAME)                                   \
	struct {                                                   \
		__uint(type, BPF_MAP_TYPE_HASH);                       \
		__uint(max_entries, MPLAB_MAX_CONNS);                  \
		__type(key, __u64);                                    \
		__type(value, struct mplab_conn);                      \
	} NAME SEC(".maps")

static __always_inline struct tcp_sock *tcp_sk(const struct sock *sk)
{
	return (struct tcp_sock *)sk;
}

static __always_inline struct inet_connection_sock *inet_csk(const struct sock *sk)
{
	return (struct inet_connection_sock *)sk;
}

static __always_inline struct mplab_ca *ca_of(const struct sock *sk)
{
	return (struct mplab_ca *)inet_csk(sk)->icsk_ca_priv;
}

static __always_inline int tcp_in_slow_start(const struct tcp_sock *tp)
{
	return tp->snd_cwnd < tp->snd_ssthresh;
}

/* include/net/tcp.h's tcp_is_cwnd_limited (the flag first, as the kernel asks it). */
static __always_inline int tcp_is_cwnd_limited(const struct sock *sk)
{
	const struct tcp_sock *tp = tcp_sk(sk);

	if (BPF_CORE_READ_BITFIELD(tp, is_cwnd_limited))
		return 1;
	/* If in slow start, ensure cwnd grows to twice what was ACKed. */
	if (tcp_in_slow_start(tp))
		return tp->snd_cwnd < 2 * tp->max_packets_out;
	return 0;
}

/* The socket's window as the pure updates of mplab_math.h take it. */
static __always_inline void win_load(struct mplab_win *w, const struct sock *sk, __s32 olia_cnt)
{
	const struct tcp_sock *tp = tcp_sk(sk);

	w->cwnd = tp->snd_cwnd;
	w->ssthresh = tp->snd_ssthresh;
	w->cnt = tp->snd_cwnd_cnt;
	w->clamp = tp->snd_cwnd_clamp;
	w->olia_cnt = olia_cnt;
	w->mss = tp->mss_cache;
}

/* Write back what the updates may change (struct_ops may write these three fields). */
static __always_inline void win_store(const struct mplab_win *w, struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);

	tp->snd_cwnd = w->cwnd;
	tp->snd_ssthresh = w->ssthresh;
	tp->snd_cwnd_cnt = w->cnt;
}

/* The owning MPTCP socket of a subflow, or 0 for a plain TCP socket. */
static __always_inline __u64 mptcp_conn_of(struct sock *sk)
{
	struct mptcp_subflow_context *ctx;
	void *ulp;

	if (!tcp_sk(sk)->is_mptcp)
		return 0;
	ulp = inet_csk(sk)->icsk_ulp_data;
	if (!ulp)
		return 0;
	ctx = bpf_rdonly_cast(ulp, bpf_core_type_id_kernel(struct mptcp_subflow_context));
	/* The context points back at its own subflow: a cheap consistency check. */
	if ((__u64)ctx->tcp_sock != (__u64)sk)
		return 0;
	return (__u64)ctx->conn;
}

/*
 * This subflow's slot in its connection's entry, claiming one if needed; NULL for a
 * plain TCP socket, before the first RTT sample, or when all slots are taken.
 */
static __always_inline struct mplab_conn *mplab_attach(void *map, struct sock *sk, struct mplab_ca *ca, int *me)
{
	struct mplab_conn *c, zero = {};
	__u64 conn = ca->conn;
	int i;

	/* Only once .init has run: the kernel calls .release only for an initialised algorithm
	 * (icsk_ca_initialized), and a subflow calls .ssthresh before that when its SYN is retransmitted
	 * (tcp_enter_loss in SYN-SENT). A slot claimed then by a subflow that never connects (a join
	 * whose SYNs go unanswered) was never freed: the entry stayed for good, with cwnd 10 and srtt 0. */
	if (!BPF_CORE_READ_BITFIELD(inet_csk(sk), icsk_ca_initialized))
		return NULL;
	if (!conn) {
		conn = mptcp_conn_of(sk);
		if (!conn)
			return NULL;
		ca->conn = conn;
	}
	c = bpf_map_lookup_elem(map, &conn);
	if (!c) {
		bpf_map_update_elem(map, &conn, &zero, BPF_NOEXIST);
		c = bpf_map_lookup_elem(map, &conn);
		if (!c)
			return NULL;
	}
	if (ca->slot) {
		i = (ca->slot - 1) & (MPLAB_MAX_SF - 1);
		if (c->sf[i].sk == (__u64)sk) {
			*me = i;
			return c;
		}
		ca->slot = 0;   /* entry was recreated: claim again */
	}
#pragma unroll
	for (i = 0; i < MPLAB_MAX_SF; i++) {
		if (c->sf[i].sk == (__u64)sk ||
		    __sync_val_compare_and_swap(&c->sf[i].sk, 0, (__u64)sk) == 0) {
			ca->slot = i + 1;
			*me = i;
			return c;
		}
	}
	return NULL;
}

/* Refresh this subflow's window and RTT in its slot. */
static __always_inline void mplab_publish(struct mplab_conn *c, int me, struct sock *sk, __u32 cwnd)
{
	struct mplab_sf *s = &c->sf[me & (MPLAB_MAX_SF - 1)];

	s->cwnd = cwnd;
	s->srtt = tcp_sk(sk)->srtt_us;   /* the kernel's unit (us << 3), as the reference reads it */
}

/* Free this subflow's slot; the last subflow out deletes the connection's entry. */
static __always_inline void mplab_detach(void *map, struct sock *sk, struct mplab_ca *ca)
{
	struct mplab_conn *c;
	__u64 conn = ca->conn;
	int i, used = 0;

	if (!conn)
		return;
	c = bpf_map_lookup_elem(map, &conn);
	if (c) {
#pragma unroll
		for (i = 0; i < MPLAB_MAX_SF; i++) {
			if (c->sf[i].sk == (__u64)sk) {
				c->sf[i].cwnd = 0;
				c->sf[i].srtt = 0;
				c->sf[i].rate = 0;
				c->sf[i].loss_int = 0;
				c->sf[i].sampling = 0;
				__sync_val_compare_and_swap(&c->sf[i].sk, (__u64)sk, 0);
			}
		}
#pragma unroll
		for (i = 0; i < MPLAB_MAX_SF; i++)
			if (c->sf[i].sk)
				used++;
		if (!used)
			bpf_map_delete_elem(map, &conn);
	}
	ca->conn = 0;
	ca->slot = 0;
}

/*
 * Thresholds and windows that no callback returned (mplab_faults, read by harness.cc.bpfcc.FaultWatch).
 * On the kernel this was found on (6.18), a struct_ops congestion control's value-returning callbacks
 * sometimes hand the kernel 0xffffffff81104110, a stale return address off the stack, instead of what the
 * program computes: the subflow enters fast recovery on an ACK during which none of the program's callbacks
 * runs (nor the tcp_cong_state_set tracepoint), and stores 0x81104110 as its threshold; the kernel's own
 * warning in tcp_undo_cwnd_reduction shows .undo_cwnd's call returning the same full address, which becomes
 * the window. PRR makes such a threshold a window of hundreds of millions of packets, and either way the
 * subflow floods its path. Nothing of that ACK runs here, so the programs cannot stop it; they count it.
 * Every ACK that finds the threshold above TCP_INFINITE_SSTHRESH, or the window at or above 2^31 (where the
 * kernel's tcp_snd_cwnd_set warns), bumps its subflow's entry (.in_ack_event), and the runner flags the
 * sample's records (cc-fault).
 */
#define MPLAB_SSTHRESH_MAX 0x7fffffffU  /* TCP_INFINITE_SSTHRESH: above it is no threshold at all */
#define MPLAB_CWND_MAX 0x7fffffffU      /* tcp_snd_cwnd_set warns on a window that is not a positive int */

struct mplab_fault_key {
	__u32 netns;     /* the socket's network namespace (inode number, as /proc/<pid>/ns/net) */
	__u32 peer_ip4;  /* network order */
	__u16 port;      /* local, host order */
	__u16 dport;     /* peer, host order */
};

struct mplab_fault {
	struct mplab_fault_key sock;  /* the key again: bpftool's value dump then says whose it is */
	__u64 acks;                   /* ACKs that found no threshold or no window */
	__u64 last_ns;                /* bpf_ktime_get_ns of the last */
	__u32 ssthresh;               /* the last such ACK's threshold */
	__u32 cwnd;                   /* and its window */
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, struct mplab_fault_key);
	__type(value, struct mplab_fault);
} mplab_faults SEC(".maps");

static __always_inline void mplab_watch(struct sock *sk)
{
	__u32 ss = tcp_sk(sk)->snd_ssthresh, cwnd = tcp_sk(sk)->snd_cwnd;
	struct mplab_fault_key key = {};
	struct mplab_fault *f, fresh = {};

	if (ss <= MPLAB_SSTHRESH_MAX && cwnd <= MPLAB_CWND_MAX)
		return;
	key.netns = BPF_CORE_READ(sk, __sk_common.skc_net.net, ns.inum);
	key.peer_ip4 = sk->__sk_common.skc_daddr;
	key.port = sk->__sk_common.skc_num;
	key.dport = bpf_ntohs(sk->__sk_common.skc_dport);
	f = bpf_map_lookup_elem(&mplab_faults, &key);
	if (!f) {
		fresh.sock = key;
		bpf_map_update_elem(&mplab_faults, &key, &fresh, BPF_NOEXIST);
		f = bpf_map_lookup_elem(&mplab_faults, &key);
		if (!f)
			return;
	}
	__sync_fetch_and_add(&f->acks, 1);
	f->last_ns = bpf_ktime_get_ns();
	f->ssthresh = ss;
	f->cwnd = cwnd;
}

/* ---- The skeleton every coupled algorithm shares ---- */

/* The connection map of algorithm NAME, its .release (free the subflow's slot), .undo_cwnd (Reno's)
 * and .in_ack_event (mplab_watch). */
#define MPLAB_CC_SKELETON(NAME)                                               \
	MPLAB_CONN_MAP(NAME##_conns);                                             \
                                                                              \
	SEC("struct_ops")                                                         \
	void BPF_PROG(NAME##_release, struct sock *sk)                            \
	{                                                                         \
		mplab_detach(&NAME##_conns, sk, ca_of(sk));                           \
	}                                                                         \
                                                                              \
	SEC("struct_ops")                                                         \
	__u32 BPF_PROG(NAME##_undo_cwnd, struct sock *sk)                         \
	{                                                                         \
		return tcp_reno_undo_cwnd(sk);                                        \
	}                                                                         \
                                                                              \
	SEC("struct_ops")                                                         \
	void BPF_PROG(NAME##_in_ack_event, struct sock *sk, __u32 flags)          \
	{                                                                         \
		mplab_watch(sk);                                                      \
	}

/* .ssthresh as Reno (halve), for the algorithms whose decrease is uncoupled. */
#define MPLAB_RENO_SSTHRESH(NAME)                                             \
	SEC("struct_ops")                                                         \
	__u32 BPF_PROG(NAME##_ssthresh, struct sock *sk)                          \
	{                                                                         \
		return tcp_reno_ssthresh(sk);                                         \
	}

/* .init: no connection yet (a subflow claims its slot on its first ACK with an RTT).
 * Returns the per-socket state for an algorithm's own initialisation. */
static __always_inline struct mplab_ca *mplab_init(struct sock *sk)
{
	struct mplab_ca *ca = ca_of(sk);

	ca->conn = 0;
	ca->slot = 0;
	return ca;
}

/* .init of an algorithm with no per-socket state of its own. */
#define MPLAB_PLAIN_INIT(NAME)                                                \
	SEC("struct_ops")                                                         \
	void BPF_PROG(NAME##_init, struct sock *sk)                               \
	{                                                                         \
		mplab_init(sk);                                                       \
	}

/*
 * Start of .cong_avoid: this subflow's connection entry (its slot in *me), or NULL after
 * a Reno step for a plain TCP socket (or before the first RTT, or with every slot taken).
 */
static __always_inline struct mplab_conn *mplab_coupled(void *map, struct sock *sk, __u32 ack, __u32 acked,
							 int *me)
{
	struct mplab_conn *c = mplab_attach(map, sk, ca_of(sk), me);

	if (!c)
		tcp_reno_cong_avoid(sk, ack, acked);
	return c;
}

/*
 * .cong_avoid of the linked-increase algorithms (LIA, BALIA): only when cwnd-limited, then
 * ON_ACK(&win, conn, me, acked), the algorithm's update in mplab_math.h, over the windows as
 * published with this ACK. A macro, not a function taking ON_ACK, so that each program calls
 * its update directly (the verifier sees no indirect call).
 */
#define MPLAB_LINKED_INCREASE(NAME, ON_ACK)                                   \
	SEC("struct_ops")                                                         \
	void BPF_PROG(NAME##_cong_avoid, struct sock *sk, __u32 ack, __u32 acked) \
	{                                                                         \
		struct mplab_conn *c;                                                 \
		struct mplab_win w;                                                   \
		int me = 0;                                                           \
                                                                              \
		c = mplab_coupled(&NAME##_conns, sk, ack, acked, &me);                \
		if (!c)                                                               \
			return;                                                           \
		mplab_publish(c, me, sk, tcp_sk(sk)->snd_cwnd);                       \
		if (!tcp_is_cwnd_limited(sk))                                         \
			return;                                                           \
		win_load(&w, sk, 0);                                                  \
		ON_ACK(&w, c, me, acked);                                         \
		win_store(&w, sk);                                                    \
		mplab_publish(c, me, sk, w.cwnd);                                     \
	}

/*
 * The struct_ops members every algorithm has, for its `struct tcp_congestion_ops` table:
 *     struct tcp_congestion_ops mplab_olia = { MPLAB_OPS(olia), .set_state = (void *)olia_set_state };
 */
#define MPLAB_OPS(NAME)                                                       \
	.init = (void *)NAME##_init,                                              \
	.release = (void *)NAME##_release,                                        \
	.cong_avoid = (void *)NAME##_cong_avoid,                                  \
	.ssthresh = (void *)NAME##_ssthresh,                                      \
	.undo_cwnd = (void *)NAME##_undo_cwnd,                                    \
	.in_ack_event = (void *)NAME##_in_ack_event,                              \
	.name = "mplab_" #NAME

/*
 * A trace of round ends (the delay-based algorithms: Vegas, wVegas). Every record begins with
 * struct mplab_round: when, which socket, what decided the round, and the window before and after;
 * the algorithm adds what its rule read. MPLAB_TRACE_RING(NAME, REC, LEN) defines NAME_rounds, an
 * array of LEN records of struct REC (whose member `head` is a struct mplab_round), and NAME_seq,
 * the count written so far; record n goes to entry n % LEN. NAME_trace_next(sk, kind, base_rtt,
 * cnt_rtt) takes the next entry with its head filled (0 if the maps are missing). A bench reads
 * the ring with `bpftool map dump` (harness.cc.bpfcc.trace_rounds). Tracing writes nothing an
 * algorithm reads.
 */
struct mplab_round {
	__u64 seq;              /* 1, 2, ...: the entry's number since the program was loaded */
	__u64 t_ns;             /* bpf_ktime_get_ns (CLOCK_MONOTONIC) */
	__u32 port;             /* the socket's local port */
	__u32 dport;            /* and its peer's (a server's subflows share the local port) */
	__u32 kind;             /* 0 the algorithm's rule, 1 too few samples (Reno's step), 2 too few and not cwnd-limited */
	__u32 base_rtt;         /* microseconds + 1, as the algorithm keeps them */
	__u32 cnt_rtt;          /* RTT samples this round */
	__u32 srtt_us;          /* the socket's smoothed RTT */
	__u32 packets_out;
	__u32 cwnd_before;
	__u32 ssthresh_before;
	__u32 cwnd_after;       /* as before until the round's update writes them */
	__u32 ssthresh_after;
	__u32 pad;
};

static __always_inline void mplab_round_fill(struct mplab_round *h, const struct sock *sk, __u32 kind,
					     __u32 base_rtt, __u32 cnt_rtt)
{
	const struct tcp_sock *tp = tcp_sk(sk);

	h->port = sk->__sk_common.skc_num;
	h->dport = bpf_ntohs(sk->__sk_common.skc_dport);
	h->kind = kind;
	h->base_rtt = base_rtt;
	h->cnt_rtt = cnt_rtt;
	h->srtt_us = tp->srtt_us >> 3;
	h->packets_out = tp->packets_out;
	h->cwnd_before = h->cwnd_after = tp->snd_cwnd;
	h->ssthresh_before = h->ssthresh_after = tp->snd_ssthresh;
}

static __always_inline void mplab_round_done(struct mplab_round *h, const struct mplab_win *w)
{
	h->cwnd_after = w->cwnd;
	h->ssthresh_after = w->ssthresh;
}

#define MPLAB_TRACE_RING(NAME, REC, LEN)                                      \
	struct {                                                                  \
		__uint(type, BPF_MAP_TYPE_ARRAY);                                     \
		__uint(max_entries, LEN);                                             \
		__type(key, __u32);                                                   \
		__type(value, struct REC);                                            \
	} NAME##_rounds SEC(".maps");                                             \
                                                                              \
	struct {                                                                  \
		__uint(type, BPF_MAP_TYPE_ARRAY);                                     \
		__uint(max_entries, 1);                                               \
		__type(key, __u32);                                                   \
		__type(value, __u64);                                                 \
	} NAME##_seq SEC(".maps");                                                \
                                                                              \
	static __always_inline struct REC *NAME##_trace_next(const struct sock *sk, __u32 kind, \
							     __u32 base_rtt, __u32 cnt_rtt) \
	{                                                                         \
		struct REC *r;                                                        \
		__u32 zero = 0, idx;                                                  \
		__u64 *seq, n;                                                        \
                                                                              \
		seq = bpf_map_lookup_elem(&NAME##_seq, &zero);                        \
		if (!seq)                                                             \
			return 0;                                                         \
		n = __sync_fetch_and_add(seq, 1) + 1;                                 \
		idx = (__u32)(n % (LEN));                                             \
		r = bpf_map_lookup_elem(&NAME##_rounds, &idx);                        \
		if (!r)                                                               \
			return 0;                                                         \
		r->head.seq = n;                                                      \
		r->head.t_ns = bpf_ktime_get_ns();                                    \
		mplab_round_fill(&r->head, sk, kind, base_rtt, cnt_rtt);              \
		return r;                                                             \
	}

#endif
