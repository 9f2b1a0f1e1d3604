// SPDX-License-Identifier: GPL-2.0
/*
 * mplab_wvegas: weighted Vegas (Cao et al., ICNP 2012) for upstream Linux MPTCP, as a
 * BPF struct_ops congestion control. Behavioural reference: multipath-tcp.org's
 * mptcp_wvegas.c: once per RTT each subflow compares its backlog estimate
 * diff = cwnd (rtt - base_rtt) / rtt with its alpha, the connection's total alpha (10
 * packets) weighted by the subflow's share of the connection's rate; +1/-1 packet per
 * RTT, and a backoff to base_rtt/(2 rtt) when queueing delay doubles. Loss handling
 * as Reno; plain TCP sockets are Reno.
 */
#include "mplab_cc.h"

MPLAB_CC_SKELETON(wvegas)
MPLAB_RENO_SSTHRESH(wvegas)

#define WVEGAS_INITIAL_ALPHA 2
#define WVEGAS_TOTAL_ALPHA 10
#define WVEGAS_GAMMA 1
#define CA_EVENT_CWND_RESTART 1
#define CA_EVENT_LOSS 3

static __always_inline void wvegas_enable(struct sock *sk, struct mplab_ca *ca)
{
	ca->doing_vegas = 1;
	ca->beg_snd_nxt = tcp_sk(sk)->snd_nxt;
	ca->cnt_rtt = 0;
	ca->sampled_rtt = 0;
	ca->alpha = WVEGAS_INITIAL_ALPHA;
	ca->queue_delay = 0;
}

SEC("struct_ops")
void BPF_PROG(wvegas_init, struct sock *sk)
{
	struct mplab_ca *ca = mplab_init(sk);

	ca->base_rtt = 0x7fffffff;
	wvegas_enable(sk, ca);
}

SEC("struct_ops")
void BPF_PROG(wvegas_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	struct mplab_ca *ca = ca_of(sk);
	__u32 vrtt;

	if (sample->rtt_us < 0)
		return;
	vrtt = sample->rtt_us + 1;
	if (vrtt < ca->base_rtt)
		ca->base_rtt = vrtt;
	ca->sampled_rtt += vrtt;
	ca->cnt_rtt++;
}

SEC("struct_ops")
void BPF_PROG(wvegas_set_state, struct sock *sk, __u8 new_state)
{
	struct mplab_ca *ca = ca_of(sk);

	if (new_state == TCP_CA_Open)
		wvegas_enable(sk, ca);
	else
		ca->doing_vegas = 0;
}

SEC("struct_ops")
void BPF_PROG(wvegas_cwnd_event, struct sock *sk, enum tcp_ca_event ev)
{
	struct mplab_ca *ca = ca_of(sk);
	struct mplab_conn *c;
	__u64 conn = ca->conn;

	if (ev == CA_EVENT_CWND_RESTART) {
		ca->base_rtt = 0x7fffffff;
		wvegas_enable(sk, ca);
	} else if (ev == CA_EVENT_LOSS && conn && ca->slot) {
		c = bpf_map_lookup_elem(&wvegas_conns, &conn);
		if (c)
			c->sf[(ca->slot - 1) & (MPLAB_MAX_SF - 1)].rate = 0;
	}
}

static __always_inline __u32 current_ssthresh(struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);
	__u32 st = BPF_CORE_READ_BITFIELD(inet_csk(sk), icsk_ca_state);
	__u32 alt = (tp->snd_cwnd >> 1) + (tp->snd_cwnd >> 2);

	if (st == TCP_CA_CWR || st == TCP_CA_Recovery)
		return tp->snd_ssthresh;
	return tp->snd_ssthresh > alt ? tp->snd_ssthresh : alt;
}

static __always_inline __u32 wvegas_ssthresh_cut(struct tcp_sock *tp)
{
	__u32 a = tp->snd_cwnd - 1;

	return tp->snd_ssthresh < a ? tp->snd_ssthresh : a;
}

SEC("struct_ops")
void BPF_PROG(wvegas_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct mplab_ca *ca = ca_of(sk);
	struct mplab_conn *c;
	struct mplab_sf *s;
	int me = 0;

	c = mplab_coupled(&wvegas_conns, sk, ack, acked, &me);
	if (!c)
		return;
	if (!ca->doing_vegas) {
		tcp_reno_cong_avoid(sk, ack, acked);
		mplab_publish(c, me, sk, tp->snd_cwnd);
		return;
	}
	s = &c->sf[me & (MPLAB_MAX_SF - 1)];
	mplab_publish(c, me, sk, tp->snd_cwnd);

	if ((__s32)(ca->beg_snd_nxt - ack) < 0) {   /* after(ack, beg_snd_nxt): one RTT has passed */
		ca->beg_snd_nxt = tp->snd_nxt;
		if (ca->cnt_rtt <= 2) {
			tcp_reno_cong_avoid(sk, ack, acked);
		} else {
			__u32 rtt = ca->sampled_rtt / ca->cnt_rtt, diff, q_delay;
			__u64 target = ((__u64)tp->snd_cwnd * ca->base_rtt) / rtt;

			diff = wvegas_diff(tp->snd_cwnd, ca->base_rtt, rtt);
			if (diff > WVEGAS_GAMMA && tcp_in_slow_start(tp)) {
				if ((__u32)target + 1 < tp->snd_cwnd)
					tp->snd_cwnd = (__u32)target + 1;
				tp->snd_ssthresh = wvegas_ssthresh_cut(tp);
			} else if (tcp_in_slow_start(tp)) {
				tcp_slow_start(tp, acked);
			} else {
				if (diff >= ca->alpha) {
					s->rate = ((__u64)tp->snd_cwnd << WVEGAS_SCALE) / rtt;
					ca->alpha = wvegas_alpha(c->sf, me, WVEGAS_TOTAL_ALPHA);
				}
				if (diff > ca->alpha) {
					tp->snd_cwnd--;
					tp->snd_ssthresh = wvegas_ssthresh_cut(tp);
				} else if (diff < ca->alpha) {
					tp->snd_cwnd++;
				}
				/* Drain the queue when the queueing delay has doubled. */
				q_delay = rtt > ca->base_rtt ? rtt - ca->base_rtt : 0;
				if (!ca->queue_delay || ca->queue_delay > q_delay)
					ca->queue_delay = q_delay;
				if (q_delay >= 2 * ca->queue_delay && q_delay) {
					__u64 backoff = ((__u64)ca->base_rtt << WVEGAS_SCALE) / (2 * rtt);

					tp->snd_cwnd = ((__u64)tp->snd_cwnd * backoff) >> WVEGAS_SCALE;
					ca->queue_delay = 0;
				}
			}
			if (tp->snd_cwnd < 2)
				tp->snd_cwnd = 2;
			else if (tp->snd_cwnd > tp->snd_cwnd_clamp)
				tp->snd_cwnd = tp->snd_cwnd_clamp;
			tp->snd_ssthresh = current_ssthresh(sk);
		}
		ca->cnt_rtt = 0;
		ca->sampled_rtt = 0;
	} else if (tcp_in_slow_start(tp)) {
		tcp_slow_start(tp, acked);
	}
	mplab_publish(c, me, sk, tp->snd_cwnd);
}

SEC(".struct_ops")
struct tcp_congestion_ops mplab_wvegas = {
	MPLAB_OPS(wvegas),
	.pkts_acked = (void *)wvegas_pkts_acked,
	.set_state = (void *)wvegas_set_state,
	.cwnd_event = (void *)wvegas_cwnd_event,
};
