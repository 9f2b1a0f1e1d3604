// SPDX-License-Identifier: GPL-2.0
/*
 * mplab_calc: runs the coupled congestion controls' arithmetic and per-event window updates
 * (mplab_math.h, the very functions the struct_ops programs call) on inputs chosen by user
 * space, via BPF_PROG_TEST_RUN of syscall programs. harness/cc/calc.py drives it: tests
 * replay event sequences through it and through the Python model of the reference kernel
 * (harness/cc/oracle.py) and compare the windows after every event.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "mplab_math.h"

char _license[] SEC("license") = "GPL";

#define EV_ACK 0     /* one ACK of `acked` packets on a cwnd-limited subflow in CA_Open */
#define EV_LOSS 1    /* a loss: .ssthresh (and OLIA's .set_state) */
#define EV_SAMPLE 2  /* wVegas: one RTT sample (.pkts_acked) */
#define EV_ROUND 3   /* wVegas: the ACK that ends a round */

struct calc_ctx {
	struct mplab_sf sf[MPLAB_MAX_SF];
	struct mplab_win win;
	struct wvegas_state wv;
	__u32 me;
	__u32 event;
	__u32 acked;
	__u32 rtt_us;        /* EV_SAMPLE */
	__u32 loss1, loss2, loss3;
	__u32 retransmits;
	/* outputs of the arithmetic, before the update */
	__u64 lia_alpha;
	__u32 lia_cnt;
	__u32 balia_pad;
	__u64 balia_ai;
	__u64 balia_md;
	__s64 olia_inc;
	__s32 olia_num;
	__u32 olia_den;
};

/* Scratch copies: globals (an array map value), as the stack is too small and ctx takes no variable offsets. */
struct mplab_sf sf[MPLAB_MAX_SF];
struct mplab_win win;
struct wvegas_state wv;

static __always_inline int load(struct calc_ctx *ctx)
{
	int i;

#pragma unroll
	for (i = 0; i < MPLAB_MAX_SF; i++)
		sf[i] = ctx->sf[i];
	win = ctx->win;
	wv = ctx->wv;
	return ctx->me & (MPLAB_MAX_SF - 1);
}

static __always_inline void store(struct calc_ctx *ctx)
{
	ctx->win = win;
	ctx->wv = wv;
}

SEC("syscall")
int calc_lia(struct calc_ctx *ctx)
{
	int me = load(ctx);

	ctx->lia_alpha = lia_alpha(sf);
	ctx->lia_cnt = lia_ai_cnt(sf, win.cwnd);
	if (ctx->event == EV_ACK)
		lia_on_ack(&win, sf, me, ctx->acked);
	else if (ctx->event == EV_LOSS)
		win.ssthresh = reno_ssthresh(win.cwnd);
	store(ctx);
	return 0;
}

SEC("syscall")
int calc_olia(struct calc_ctx *ctx)
{
	int me = load(ctx);
	__u32 l1 = ctx->loss1, l2 = ctx->loss2;

	olia_epsilon(sf, me, &ctx->olia_num, &ctx->olia_den);
	ctx->olia_inc = olia_inc(sf, me, win.cwnd);
	if (ctx->event == EV_ACK) {
		olia_on_ack(&win, sf, me, ctx->acked);
	} else if (ctx->event == EV_LOSS) {
		olia_on_loss(&l1, &l2, ctx->loss3, ctx->retransmits);
		ctx->loss1 = l1;
		ctx->loss2 = l2;
		win.ssthresh = reno_ssthresh(win.cwnd);
	}
	store(ctx);
	return 0;
}

SEC("syscall")
int calc_balia(struct calc_ctx *ctx)
{
	int me = load(ctx);
	__u64 ai, md;

	balia_params(sf, me, win.cwnd, win.mss, &ai, &md);
	ctx->balia_ai = ai;
	ctx->balia_md = md;
	if (ctx->event == EV_ACK)
		balia_on_ack(&win, sf, me, ctx->acked);
	else if (ctx->event == EV_LOSS)
		win.ssthresh = balia_loss_ssthresh(sf, me, win.cwnd, win.mss);
	store(ctx);
	return 0;
}

SEC("syscall")
int calc_wvegas(struct calc_ctx *ctx)
{
	int me = load(ctx);

	if (ctx->event == EV_SAMPLE)
		wvegas_sample(&wv, ctx->rtt_us);
	else if (ctx->event == EV_ROUND)
		wvegas_round(&win, &wv, sf, me, ctx->acked);
	else if (ctx->event == EV_ACK && win.cwnd < win.ssthresh)
		win_slow_start(&win, ctx->acked);
	else if (ctx->event == EV_LOSS)
		win.ssthresh = reno_ssthresh(win.cwnd);
	store(ctx);
	return 0;
}
