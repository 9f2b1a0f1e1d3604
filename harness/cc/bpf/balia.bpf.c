// SPDX-License-Identifier: GPL-2.0
/*
 * mplab_balia: Balanced Linked Adaptation (Peng et al., IEEE/ACM ToN 2016) for upstream
 * Linux MPTCP, as a BPF struct_ops congestion control. Behavioural reference:
 * multipath-tcp.org's mptcp_balia.c: coupled increase in congestion avoidance and a
 * coupled decrease w_r/2 * min(alpha_r, 1.5) on loss. Slow start as Reno; plain TCP
 * sockets and single-subflow connections are Reno.
 */
#include "mplab_cc.h"

MPLAB_CC_SKELETON(balia)
MPLAB_PLAIN_INIT(balia)
MPLAB_LINKED_INCREASE(balia, mplab_balia_on_ack)

/* The coupled decrease: cwnd - md (mplab_math.h: balia_loss_ssthresh); Reno for plain TCP. */
SEC("struct_ops")
__u32 BPF_PROG(balia_ssthresh, struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct mplab_conn *c;
	int me = 0;

	c = mplab_attach(&balia_conns, sk, ca_of(sk), &me);
	if (!c)
		return tcp_reno_ssthresh(sk);
	mplab_publish(c, me, sk, tp->snd_cwnd);
	return mplab_balia_ssthresh(c, me, tp->snd_cwnd, tp->mss_cache);
}

SEC(".struct_ops")
struct tcp_congestion_ops mplab_balia = {
	MPLAB_OPS(balia),
};
