// SPDX-License-Identifier: GPL-2.0
/*
 * mplab_olia: Opportunistic Linked Increases (Khalili et al., IEEE/ACM ToN 2013) for
 * upstream Linux MPTCP, as a BPF struct_ops congestion control. Behavioural reference:
 * multipath-tcp.org's mptcp_olia.c: each subflow tracks the bytes ACKed between its
 * last losses (snd_una at the last three losses), the increase per ACK is
 * w_r/rtt_r^2 / (sum w_p/rtt_p)^2 + eps_r/w_r, and a fractional counter turns it into
 * +1/-1 packet steps (mplab_math.h's olia_inc and olia_on_ack). Slow start and halving as
 * Reno; plain TCP sockets are Reno.
 */
#include "mplab_cc.h"

MPLAB_CC_SKELETON(olia)
MPLAB_RENO_SSTHRESH(olia)

static __always_inline void olia_reset(struct sock *sk, struct mplab_ca *ca)
{
	__u32 una = tcp_sk(sk)->snd_una;

	ca->loss1 = una;
	ca->loss2 = una;
	ca->loss3 = una;
	ca->cnt = 0;
}

SEC("struct_ops")
void BPF_PROG(olia_init, struct sock *sk)
{
	olia_reset(sk, mplab_init(sk));
}

SEC("struct_ops")
void BPF_PROG(olia_set_state, struct sock *sk, __u8 new_state)
{
	struct mplab_ca *ca = ca_of(sk);

	if (!ca->conn)
		return;
	/* A new loss: shift the inter-loss markers (not for a repeated timeout). */
	if (new_state == TCP_CA_Loss || new_state == TCP_CA_Recovery || new_state == TCP_CA_CWR)
		olia_on_loss(&ca->loss1, &ca->loss2, ca->loss3, inet_csk(sk)->icsk_retransmits);
}

/* The window without fast recovery's artificial inflation (RFC 5681). */
static __always_inline __u32 olia_crt_cwnd(struct sock *sk)
{
	if (BPF_CORE_READ_BITFIELD(inet_csk(sk), icsk_ca_state) == TCP_CA_Recovery)
		return tcp_sk(sk)->snd_ssthresh;
	return tcp_sk(sk)->snd_cwnd;
}

static __always_inline void olia_publish(struct mplab_conn *c, int me, struct sock *sk, struct mplab_ca *ca)
{
	mplab_publish(c, me, sk, olia_crt_cwnd(sk));
	c->sf[me & (MPLAB_MAX_SF - 1)].loss_int = olia_loss_int(ca->loss1, ca->loss2, ca->loss3);
}

SEC("struct_ops")
void BPF_PROG(olia_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct mplab_ca *ca = ca_of(sk);
	struct mplab_conn *c;
	struct mplab_win w;
	int me = 0;

	c = mplab_coupled(&olia_conns, sk, ack, acked, &me);
	if (!c)
		return;
	ca->loss3 = tp->snd_una;
	olia_publish(c, me, sk, ca);
	if (!tcp_is_cwnd_limited(sk))
		return;
	win_load(&w, sk, ca->cnt);
	mplab_olia_on_ack(&w, c, me, acked);
	win_store(&w, sk);
	ca->cnt = w.olia_cnt;
	olia_publish(c, me, sk, ca);
}

SEC(".struct_ops")
struct tcp_congestion_ops mplab_olia = {
	MPLAB_OPS(olia),
	.set_state = (void *)olia_set_state,
};
