// SPDX-License-Identifier: GPL-2.0
/*
 * Which kernel path sends each pure ACK to the shared-bottleneck rig's servers (bench/ack_callers.py): at the
 * net_dev_start_xmit tracepoint (BTF-typed), for an ACK of the rig's flows, the flow (server port, path), how many
 * 1400-byte segments it acknowledges beyond the socket's previous ACK, and the kernel stack. A tracepoint, not a
 * probe on tcp_send_ack: this kernel has no kprobe events and refuses fentry programs.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_endian.h>

#define DEPTH 32

struct ack_key {
	__u16 dport;
	__u8 path;
	__u8 segs;
	__s32 stack;
};

struct {
	__uint(type, BPF_MAP_TYPE_STACK_TRACE);
	__uint(max_entries, 8192);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, DEPTH * sizeof(__u64));
} stacks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct ack_key);
	__type(value, __u64);
} acks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u64);
	__type(value, __u32);
} last_ack SEC(".maps");

SEC("tp_btf/net_dev_start_xmit")
int BPF_PROG(on_xmit, struct sk_buff *skb, struct net_device *dev)
{
	struct sock *sk = skb->sk;
	struct ack_key k = {};
	struct tcphdr th;
	__u64 one = 1, *n, skp;
	__u32 ack, *prev, segs;
	__u16 dport;

	if (!sk || skb->len > 200)
		return 0;
	dport = bpf_ntohs(sk->__sk_common.skc_dport);
	if (dport < 5301 || dport > 5304)
		return 0;
	if (bpf_probe_read_kernel(&th, sizeof(th), skb->head + skb->transport_header))
		return 0;
	if (!th.ack || th.syn || th.fin || th.rst)
		return 0;
	ack = bpf_ntohl(th.ack_seq);
	skp = (__u64)sk;
	prev = bpf_map_lookup_elem(&last_ack, &skp);
	segs = prev ? (ack - *prev) / 1400 : 99;
	bpf_map_update_elem(&last_ack, &skp, &ack, BPF_ANY);
	k.dport = dport;
	k.path = (sk->__sk_common.skc_rcv_saddr >> 16) & 0xff;
	k.segs = segs > 9 ? 9 : segs;
	k.stack = bpf_get_stackid(ctx, &stacks, 0);
	n = bpf_map_lookup_elem(&acks, &k);
	if (n)
		__sync_fetch_and_add(n, 1);
	else
		bpf_map_update_elem(&acks, &k, &one, BPF_NOEXIST);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
