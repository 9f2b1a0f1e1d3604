// SPDX-License-Identifier: GPL-2.0
/*
 * mplab_lia: Linked Increases (RFC 6356) for upstream Linux MPTCP, as a BPF struct_ops
 * congestion control. Behavioural reference: multipath-tcp.org's mptcp_coupled.c
 * (slow start and decrease as Reno; in congestion avoidance the increase of each
 * subflow is coupled through alpha). Plain TCP sockets and single-subflow connections
 * behave as Reno. The arithmetic and the update are mplab_math.h's lia_alpha and lia_on_ack.
 */
#include "mplab_cc.h"

MPLAB_CC_SKELETON(lia)
MPLAB_PLAIN_INIT(lia)
MPLAB_LINKED_INCREASE(lia, mplab_lia_on_ack)
MPLAB_RENO_SSTHRESH(lia)

SEC(".struct_ops")
struct tcp_congestion_ops mplab_lia = {
	MPLAB_OPS(lia),
};
