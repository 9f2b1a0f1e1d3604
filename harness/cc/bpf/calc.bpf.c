// SPDX-License-Identifier: GPL-2.0
/*
 * mplab_calc: runs the coupled congestion controls' window arithmetic (mplab_math.h,
 * the very functions the struct_ops programs call) on inputs chosen by user space, via
 * BPF_PROG_TEST_RUN of a syscall program. Tests compare its answers with a reference
 * computation of the papers' equations (harness/cc/calc.py).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "mplab_math.h"

char _license[] SEC("license") = "GPL";

struct calc_ctx {
	struct mplab_sf sf[MPLAB_MAX_SF];
	__u32 me;
	__u32 total_alpha;
	__u32 cwnd;
	__u32 base_rtt_us;
	__u32 rtt_us;
	/* outputs */
	__u32 lia_cnt;
	__u32 balia_cnt;
	__u32 balia_md;
	__u32 wvegas_alpha;
	__u32 wvegas_diff;
	__s64 olia_inc;
};

/* Scratch copy of the inputs: a global (array map value), as the stack is too small. */
struct mplab_sf sf[MPLAB_MAX_SF];

static __always_inline int load(struct calc_ctx *ctx)
{
	int i;

#pragma unroll
	for (i = 0; i < MPLAB_MAX_SF; i++) {
		sf[i].sk = ctx->sf[i].sk;
		sf[i].cwnd = ctx->sf[i].cwnd;
		sf[i].srtt_us = ctx->sf[i].srtt_us;
		sf[i].rate = ctx->sf[i].rate;
		sf[i].loss_int = ctx->sf[i].loss_int;
		sf[i].pad = 0;
	}
	return ctx->me & (MPLAB_MAX_SF - 1);
}

/* One program per algorithm: together their unrolled loops would exceed the verifier's budget. */
SEC("syscall")
int calc_lia(struct calc_ctx *ctx)
{
	ctx->lia_cnt = lia_ai_cnt(sf, load(ctx));
	return 0;
}

SEC("syscall")
int calc_olia(struct calc_ctx *ctx)
{
	ctx->olia_inc = olia_inc(sf, load(ctx));
	return 0;
}

SEC("syscall")
int calc_balia_ai(struct calc_ctx *ctx)
{
	ctx->balia_cnt = balia_ai_cnt(sf, load(ctx));
	return 0;
}

SEC("syscall")
int calc_balia_md(struct calc_ctx *ctx)
{
	ctx->balia_md = balia_md(sf, load(ctx));
	return 0;
}

SEC("syscall")
int calc_wvegas(struct calc_ctx *ctx)
{
	ctx->wvegas_alpha = wvegas_alpha(sf, load(ctx), ctx->total_alpha);
	ctx->wvegas_diff = wvegas_diff(ctx->cwnd, ctx->base_rtt_us, ctx->rtt_us);
	return 0;
}
