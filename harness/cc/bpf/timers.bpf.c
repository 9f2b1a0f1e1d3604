// SPDX-License-Identifier: GPL-2.0
/*
 * mplab: the kernel's TCP timers scaled per socket for a testbed that runs S times faster than real time.
 *
 * A sock_ops program attached to the testbed's cgroup (v2). On every TCP socket of a process in that
 * cgroup, MPTCP subflows included (the kernel gives a subflow its MPTCP socket's cgroup), it sets
 *
 *   TCP_BPF_DELACK_MAX: the delayed-ACK timer's ceiling, and
 *   TCP_BPF_RTO_MIN:    the minimum retransmission timeout,
 *
 * to the values in mplab_timers_cfg (microseconds; user space writes them: the real-time values / S,
 * rounded to what the kernel's jiffies can hold). It does so when the connection is established, on
 * both sides (active: the client's sockets, its joined subflows; passive: the server's). The SYN's
 * timeout (BPF_SOCK_OPS_TIMEOUT_INIT) is left as it is: no transfer runs on it.
 *
 * What each socket ended up with is read back from the socket itself (icsk_delack_max, icsk_rto_min,
 * in jiffies) into mplab_timers_seen, keyed by its addresses and ports, with the setsockopt results:
 * the proof that a subflow got them is there, not in the program's intent.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

char _license[] SEC("license") = "GPL";

#define SOL_TCP 6

struct timers_cfg {
	__u32 delack_max_us;  /* 0: leave the socket's own */
	__u32 rto_min_us;     /* 0: leave the socket's own */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct timers_cfg);
} mplab_timers_cfg SEC(".maps");

struct timers_key {
	__u32 local_ip4;   /* network order */
	__u32 remote_ip4;  /* network order */
	__u32 local_port;  /* host order */
	__u32 remote_port; /* host order */
};

struct timers_seen {
	__u32 op;                 /* the sock_ops callback that set them */
	__s32 delack_err;         /* bpf_setsockopt's result (0: set) */
	__s32 rto_err;
	__u32 delack_max_jiffies; /* read back from the socket */
	__u32 rto_min_jiffies;
	__u32 sets;               /* how many times this socket was set */
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, struct timers_key);
	__type(value, struct timers_seen);
} mplab_timers_seen SEC(".maps");

SEC("sockops")
int mplab_timers(struct bpf_sock_ops *skops)
{
	__u32 op = skops->op;
	__u32 zero = 0;
	struct timers_cfg *cfg;
	struct timers_seen seen = {}, *old;
	struct timers_key key = {};
	struct bpf_sock *sk;
	struct tcp_sock *tp;
	int val;

	if (op != BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB && op != BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB)
		return 1;
	cfg = bpf_map_lookup_elem(&mplab_timers_cfg, &zero);
	if (!cfg)
		return 1;
	seen.op = op;
	if (cfg->delack_max_us) {
		val = cfg->delack_max_us;
		seen.delack_err = bpf_setsockopt(skops, SOL_TCP, TCP_BPF_DELACK_MAX, &val, sizeof(val));
	}
	if (cfg->rto_min_us) {
		val = cfg->rto_min_us;
		seen.rto_err = bpf_setsockopt(skops, SOL_TCP, TCP_BPF_RTO_MIN, &val, sizeof(val));
	}
	sk = skops->sk;
	if (!sk)
		return 1;
	tp = bpf_skc_to_tcp_sock(sk);
	if (tp) {
		seen.delack_max_jiffies = tp->inet_conn.icsk_delack_max;
		seen.rto_min_jiffies = tp->inet_conn.icsk_rto_min;
	}
	key.local_ip4 = skops->local_ip4;
	key.remote_ip4 = skops->remote_ip4;
	key.local_port = skops->local_port;
	key.remote_port = bpf_ntohl(skops->remote_port);
	old = bpf_map_lookup_elem(&mplab_timers_seen, &key);
	seen.sets = old ? old->sets + 1 : 1;
	bpf_map_update_elem(&mplab_timers_seen, &key, &seen, BPF_ANY);
	return 1;
}
