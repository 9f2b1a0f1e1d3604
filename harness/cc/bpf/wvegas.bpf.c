// SPDX-License-Identifier: GPL-2.0
/*
 * mplab_wvegas: weighted Vegas (Cao et al., ICNP 2012) for upstream Linux MPTCP, as a
 * BPF struct_ops congestion control. Behavioural reference: multipath-tcp.org's
 * mptcp_wvegas.c: once per RTT each subflow compares its backlog estimate
 * diff = cwnd (rtt - base_rtt) / rtt with its alpha, the connection's total alpha (10
 * packets) weighted by the subflow's share of the connection's rate; +1/-1 packet per
 * RTT, and a backoff to base_rtt/(2 rtt) when queueing delay doubles. Loss handling
 * as Reno; plain TCP sockets are Reno.
 *
 * Every round end is written to wvegas_rounds, a ring of WVEGAS_TRACE_LEN entries (vegas.bpf.c's
 * kind of trace): the subflow's slot, the round's mean RTT and sample count, base RTT, alpha,
 * weight and queueing delay as the round decided from them and as it left them, the window before
 * and after, so that a bench can read each subflow's own view (bench/cc_theory.py --wvegas-rounds).
 * Tracing writes nothing the algorithm reads.
 */
#include "mplab_cc.h"

MPLAB_CC_SKELETON(wvegas)
MPLAB_RENO_SSTHRESH(wvegas)

#define WVEGAS_TRACE_LEN 16384

/* What one subflow's round end decided from (mplab_round: base RTT, samples, window) and wVegas' own state. */
struct wvegas_round_rec {
	struct mplab_round head;
	__u64 weight_after;       /* the subflow's share of the connection's rate, 2^-16 */
	__u32 slot;               /* the subflow's slot in its connection (0-based) */
	__u32 rtt;                /* the round's mean sample (sampled_rtt / cnt_rtt; 0 without samples) */
	__u32 alpha_before;
	__u32 alpha_after;
	__u32 queue_delay_before;
	__u32 queue_delay_after;
};

MPLAB_TRACE_RING(wvegas, wvegas_round_rec, WVEGAS_TRACE_LEN)

/* Write one round end as decided from; wvegas_trace_done adds what it left. */
static __always_inline struct wvegas_round_rec *wvegas_trace(const struct sock *sk, const struct wvegas_state *st,
							     int me, __u32 kind)
{
	struct wvegas_round_rec *r = wvegas_trace_next(sk, kind, st->base_rtt, st->cnt_rtt);

	if (!r)
		return 0;
	r->slot = me;
	r->rtt = st->cnt_rtt ? st->sampled_rtt / st->cnt_rtt : 0;
	r->alpha_before = r->alpha_after = st->alpha;
	r->queue_delay_before = r->queue_delay_after = st->queue_delay;
	r->weight_after = st->weight;
	return r;
}

static __always_inline void wvegas_trace_done(struct wvegas_round_rec *r, const struct mplab_win *w,
					      const struct wvegas_state *st)
{
	if (!r)
		return;
	mplab_round_done(&r->head, w);
	r->alpha_after = st->alpha;
	r->queue_delay_after = st->queue_delay;
	r->weight_after = st->weight;
}

#define CA_EVENT_CWND_RESTART 1
#define CA_EVENT_LOSS 3

static __always_inline void wvegas_enable(struct sock *sk, struct mplab_ca *ca)
{
	ca->beg_snd_nxt = tcp_sk(sk)->snd_nxt;
	wvegas_reset(&ca->wv);
}

SEC("struct_ops")
void BPF_PROG(wvegas_init, struct sock *sk)
{
	struct mplab_ca *ca = mplab_init(sk);

	ca->wv.base_rtt = 0x7fffffff;
	wvegas_enable(sk, ca);
}

SEC("struct_ops")
void BPF_PROG(wvegas_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	if (sample->rtt_us < 0)
		return;
	wvegas_sample(&ca_of(sk)->wv, (__u32)sample->rtt_us);
}

SEC("struct_ops")
void BPF_PROG(wvegas_set_state, struct sock *sk, __u8 new_state)
{
	struct mplab_ca *ca = ca_of(sk);

	if (new_state == TCP_CA_Open)
		wvegas_enable(sk, ca);
	else
		ca->wv.doing = 0;
}

SEC("struct_ops")
void BPF_PROG(wvegas_cwnd_event, struct sock *sk, enum tcp_ca_event ev)
{
	struct mplab_ca *ca = ca_of(sk);
	struct mplab_conn *c;
	__u64 conn = ca->conn;

	if (ev == CA_EVENT_CWND_RESTART) {
		ca->wv.base_rtt = 0x7fffffff;
		wvegas_enable(sk, ca);
	} else if (ev == CA_EVENT_LOSS && conn && ca->slot) {
		ca->wv.rate = 0;
		c = bpf_map_lookup_elem(&wvegas_conns, &conn);
		if (c)
			c->sf[(ca->slot - 1) & (MPLAB_MAX_SF - 1)].rate = 0;
	}
}

/* The window and whether this round has samples, for the other subflows' weights. */
static __always_inline void wvegas_publish(struct mplab_conn *c, int me, struct sock *sk, struct mplab_ca *ca)
{
	mplab_publish(c, me, sk, tcp_sk(sk)->snd_cwnd);
	c->sf[me & (MPLAB_MAX_SF - 1)].rate = ca->wv.rate;
	c->sf[me & (MPLAB_MAX_SF - 1)].sampling = ca->wv.sampled_rtt > 0;
}

SEC("struct_ops")
void BPF_PROG(wvegas_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct mplab_ca *ca = ca_of(sk);
	struct wvegas_round_rec *rec;
	struct mplab_conn *c;
	struct mplab_win w;
	int me = 0;

	c = mplab_coupled(&wvegas_conns, sk, ack, acked, &me);
	if (!c)
		return;
	if (!ca->wv.doing) {
		tcp_reno_cong_avoid(sk, ack, acked);
		wvegas_publish(c, me, sk, ca);
		return;
	}
	wvegas_publish(c, me, sk, ca);
	win_load(&w, sk, 0);
	if ((__s32)(ca->beg_snd_nxt - ack) < 0) {   /* after(ack, beg_snd_nxt): one RTT has passed */
		ca->beg_snd_nxt = tp->snd_nxt;
		if (ca->wv.cnt_rtt <= 2 && !tcp_is_cwnd_limited(sk)) {
			/* tcp_reno_cong_avoid leaves a window that is not cwnd-limited alone */
			wvegas_trace(sk, &ca->wv, me, 2);
			ca->wv.cnt_rtt = 0;
			ca->wv.sampled_rtt = 0;
		} else {
			rec = wvegas_trace(sk, &ca->wv, me, ca->wv.cnt_rtt <= 2 ? 1 : 0);
			mplab_wvegas_round(&w, &ca->wv, c, me, acked);
			wvegas_trace_done(rec, &w, &ca->wv);
		}
	} else if (w.cwnd < w.ssthresh) {
		win_slow_start(&w, acked);
	}
	win_store(&w, sk);
	wvegas_publish(c, me, sk, ca);
}

SEC(".struct_ops")
struct tcp_congestion_ops mplab_wvegas = {
	MPLAB_OPS(wvegas),
	.pkts_acked = (void *)wvegas_pkts_acked,
	.set_state = (void *)wvegas_set_state,
	.cwnd_event = (void *)wvegas_cwnd_event,
};
