// SPDX-License-Identifier: GPL-2.0
/*
 * mplab_lia: Linked Increases (RFC 6356) for upstream Linux MPTCP, as a BPF struct_ops
 * congestion control. Behavioural reference: multipath-tcp.org's mptcp_coupled.c
 * (slow start and decrease as Reno; in congestion avoidance the increase of each
 * subflow is coupled through alpha). Plain TCP sockets and single-subflow connections
 * behave as Reno.
 */
#include "mplab_cc.h"

MPLAB_CONN_MAP(lia_conns);

SEC("struct_ops")
void BPF_PROG(lia_init, struct sock *sk)
{
	struct mplab_ca *ca = ca_of(sk);

	ca->conn = 0;
	ca->slot = 0;
}

SEC("struct_ops")
void BPF_PROG(lia_release, struct sock *sk)
{
	mplab_detach(&lia_conns, sk, ca_of(sk));
}

SEC("struct_ops")
void BPF_PROG(lia_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct mplab_ca *ca = ca_of(sk);
	struct mplab_conn *c;
	int me = 0;

	c = mplab_attach(&lia_conns, sk, ca, &me);
	if (!c) {
		tcp_reno_cong_avoid(sk, ack, acked);
		return;
	}
	mplab_publish(c, me, sk, tp->snd_cwnd);
	if (!tcp_is_cwnd_limited(sk))
		return;
	if (tcp_in_slow_start(tp)) {
		acked = tcp_slow_start(tp, acked);
		if (!acked)
			goto out;
	}
	tcp_cong_avoid_ai(tp, lia_ai_cnt(c->sf, me), acked);
out:
	mplab_publish(c, me, sk, tp->snd_cwnd);
}

SEC("struct_ops")
__u32 BPF_PROG(lia_ssthresh, struct sock *sk)
{
	return tcp_reno_ssthresh(sk);
}

SEC("struct_ops")
__u32 BPF_PROG(lia_undo_cwnd, struct sock *sk)
{
	return tcp_reno_undo_cwnd(sk);
}

SEC(".struct_ops")
struct tcp_congestion_ops mplab_lia = {
	.init = (void *)lia_init,
	.release = (void *)lia_release,
	.cong_avoid = (void *)lia_cong_avoid,
	.ssthresh = (void *)lia_ssthresh,
	.undo_cwnd = (void *)lia_undo_cwnd,
	.name = "mplab_lia",
};
