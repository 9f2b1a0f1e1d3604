// SPDX-License-Identifier: GPL-2.0
/*
 * mplab_vegas: single-path TCP Vegas as a BPF struct_ops congestion control, a port of Linux's
 * net/ipv4/tcp_vegas.c (Brakmo and Peterson, IEEE JSAC 1995, as Linux implements it) for kernels
 * built without CONFIG_TCP_CONG_VEGAS. It is the competitor the wVegas paper measures wVegas
 * against, for bench/cc_theory.py (`--competitors vegas`); scenarios do not offer it.
 *
 * Once per round (the ACK that passes the snd_nxt recorded at the round's start) with more than
 * two RTT samples: diff = cwnd (minRTT - baseRTT) / baseRTT packets queued; in slow start, leave it
 * for the window that matches the actual rate + 1 once diff > gamma; in congestion avoidance
 * -1 packet above beta, +1 below alpha (alpha 2, beta 4, gamma 1, the module's defaults). With
 * two samples or fewer, Reno's step; between round ends, Reno's slow start only. Losses as Reno.
 * The round's update is mplab_math.h's vegas_round (replayed against harness/cc/oracle.py).
 *
 * Every round end is written to vegas_rounds, a ring of VEGAS_TRACE_LEN entries (vegas_seq counts
 * them; entry seq % VEGAS_TRACE_LEN): what the round decided from (its minimum RTT, the base RTT,
 * its sample count) beside what the socket kept (smoothed RTT, packets out), so that a bench can
 * read Vegas' own per-round view (`bpftool map dump`, bench/cc_theory.py --vegas-rounds). Tracing
 * writes nothing the algorithm reads.
 */
#include "mplab_cc.h"

#define VEGAS_TRACE_LEN 8192

/* What one round end decided from (mplab_round: the base RTT, samples, window) and the round's minimum RTT. */
struct vegas_round_rec {
	struct mplab_round head;
	__u32 min_rtt;      /* microseconds + 1 */
	__u32 pad;
};

MPLAB_TRACE_RING(vegas, vegas_round_rec, VEGAS_TRACE_LEN)

static __always_inline struct vegas_round_rec *vegas_trace(const struct sock *sk, const struct vegas_state *st,
							   __u32 kind)
{
	struct vegas_round_rec *r = vegas_trace_next(sk, kind, st->base_rtt, st->cnt_rtt);

	if (r)
		r->min_rtt = st->min_rtt;
	return r;
}

/* Per-socket state in icsk_ca_priv: struct vegas of tcp_vegas.h. */
struct vegas_ca {
	__u32 beg_snd_nxt;
	struct vegas_state v;
};

static __always_inline struct vegas_ca *vegas_of(const struct sock *sk)
{
	return (struct vegas_ca *)inet_csk(sk)->icsk_ca_priv;
}

/* vegas_enable: take samples from the next round on. */
static __always_inline void vegas_enable_sk(struct sock *sk)
{
	struct vegas_ca *ca = vegas_of(sk);

	ca->beg_snd_nxt = tcp_sk(sk)->snd_nxt;
	vegas_enable(&ca->v);
}

/* tcp_vegas_init */
static __always_inline void vegas_init_sk(struct sock *sk)
{
	vegas_of(sk)->v.base_rtt = 0x7fffffff;
	vegas_enable_sk(sk);
}

SEC("struct_ops")
void BPF_PROG(vegas_init, struct sock *sk)
{
	vegas_init_sk(sk);
}

SEC("struct_ops")
void BPF_PROG(vegas_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	if (sample->rtt_us < 0)
		return;
	vegas_sample(&vegas_of(sk)->v, (__u32)sample->rtt_us);
}

SEC("struct_ops")
void BPF_PROG(vegas_set_state, struct sock *sk, __u8 new_state)
{
	if (new_state == TCP_CA_Open)
		vegas_enable_sk(sk);
	else
		vegas_of(sk)->v.doing = 0;
}

/* Restarting after idle: no decision until a whole flight has fresh samples. */
SEC("struct_ops")
void BPF_PROG(vegas_cwnd_event, struct sock *sk, enum tcp_ca_event ev)
{
	if (ev == CA_EVENT_CWND_RESTART || ev == CA_EVENT_TX_START)
		vegas_init_sk(sk);
}

SEC("struct_ops")
void BPF_PROG(vegas_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct vegas_ca *ca = vegas_of(sk);
	struct vegas_round_rec *rec;
	struct mplab_win w;

	if (!ca->v.doing) {
		tcp_reno_cong_avoid(sk, ack, acked);
		return;
	}
	if ((__s32)(ca->beg_snd_nxt - ack) < 0) {   /* after(ack, beg_snd_nxt): one round has passed */
		ca->beg_snd_nxt = tp->snd_nxt;
		if (ca->v.cnt_rtt <= 2 && !tcp_is_cwnd_limited(sk)) {
			/* tcp_reno_cong_avoid leaves a window that is not cwnd-limited alone */
			vegas_trace(sk, &ca->v, 2);
			ca->v.cnt_rtt = 0;
			ca->v.min_rtt = 0x7fffffff;
			return;
		}
		rec = vegas_trace(sk, &ca->v, ca->v.cnt_rtt <= 2 ? 1 : 0);
		win_load(&w, sk, 0);
		vegas_round(&w, &ca->v, acked);
		win_store(&w, sk);
		if (rec)
			mplab_round_done(&rec->head, &w);
	} else if (tcp_in_slow_start(tp)) {
		tcp_slow_start(tp, acked);
	}
}

SEC("struct_ops")
__u32 BPF_PROG(vegas_ssthresh, struct sock *sk)
{
	return tcp_reno_ssthresh(sk);
}

SEC("struct_ops")
__u32 BPF_PROG(vegas_undo_cwnd, struct sock *sk)
{
	return tcp_reno_undo_cwnd(sk);
}

SEC(".struct_ops")
struct tcp_congestion_ops mplab_vegas = {
	.init = (void *)vegas_init,
	.cong_avoid = (void *)vegas_cong_avoid,
	.ssthresh = (void *)vegas_ssthresh,
	.undo_cwnd = (void *)vegas_undo_cwnd,
	.pkts_acked = (void *)vegas_pkts_acked,
	.set_state = (void *)vegas_set_state,
	.cwnd_event = (void *)vegas_cwnd_event,
	.name = "mplab_vegas",
};
