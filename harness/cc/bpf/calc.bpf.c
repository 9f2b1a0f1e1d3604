// SPDX-License-Identifier: GPL-2.0
/*
 * mplab_calc: runs the coupled congestion controls' arithmetic and per-event window updates
 * (mplab_math.h, the very functions the struct_ops programs call) on inputs chosen by user
 * space, via BPF_PROG_TEST_RUN of syscall programs. harness/cc/calc.py drives it: tests
 * replay event sequences through it and through the Python model of the reference kernel
 * (harness/cc/oracle.py) and compare the windows after every event.
 */
#ifdef MPLAB_HOST
/* The same source built for the host (harness/cc/calc.py's HostCalculator): tests without root. */
#include <stdint.h>
typedef uint64_t __u64;
typedef uint32_t __u32;
typedef int64_t __s64;
typedef int32_t __s32;
#ifndef __always_inline
#define __always_inline inline __attribute__((always_inline))
#endif
#define SEC(name)
#else
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#endif
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
	struct vegas_state vg;   /* Vegas (single path): its round state */
};

/* Scratch copies: globals (an array map value), as the stack is too small and ctx takes no variable offsets. */
struct mplab_conn conn;
struct mplab_win win;
struct wvegas_state wv;
struct vegas_state vg;
struct balia_out balia;

/* Field by field: the verifier refuses a context pointer moved before a dereference, which a
 * struct copy compiles to. */
#define COPY_WIN(D, S) do { (D).cwnd = (S).cwnd; (D).ssthresh = (S).ssthresh; (D).cnt = (S).cnt; \
	(D).clamp = (S).clamp; (D).olia_cnt = (S).olia_cnt; (D).mss = (S).mss; } while (0)
#define COPY_WV(D, S) do { (D).rate = (S).rate; (D).weight = (S).weight; (D).base_rtt = (S).base_rtt; \
	(D).sampled_rtt = (S).sampled_rtt; (D).cnt_rtt = (S).cnt_rtt; (D).alpha = (S).alpha; \
	(D).queue_delay = (S).queue_delay; (D).doing = (S).doing; } while (0)
#define COPY_VG(D, S) do { (D).base_rtt = (S).base_rtt; (D).min_rtt = (S).min_rtt; \
	(D).cnt_rtt = (S).cnt_rtt; (D).doing = (S).doing; } while (0)

static __always_inline int load(struct calc_ctx *ctx)
{
	int i;

#pragma unroll
	for (i = 0; i < MPLAB_MAX_SF; i++) {
		conn.sf[i].sk = ctx->sf[i].sk;
		conn.sf[i].cwnd = ctx->sf[i].cwnd;
		conn.sf[i].srtt = ctx->sf[i].srtt;
		conn.sf[i].rate = ctx->sf[i].rate;
		conn.sf[i].loss_int = ctx->sf[i].loss_int;
		conn.sf[i].sampling = ctx->sf[i].sampling;
	}
	COPY_WIN(win, ctx->win);
	COPY_WV(wv, ctx->wv);
	COPY_VG(vg, ctx->vg);
	return ctx->me & (MPLAB_MAX_SF - 1);
}

static __always_inline void store(struct calc_ctx *ctx)
{
	COPY_WIN(ctx->win, win);
	COPY_WV(ctx->wv, wv);
	COPY_VG(ctx->vg, vg);
}

/* Each program calls the global functions of mplab_math.h, verified once each, as the struct_ops do. */
SEC("syscall")
int calc_lia(struct calc_ctx *ctx)
{
	int me = load(ctx);

	ctx->lia_alpha = mplab_lia_alpha(&conn);
	ctx->lia_cnt = mplab_lia_ai_cnt(&conn, win.cwnd);
	if (ctx->event == EV_ACK)
		mplab_lia_on_ack(&win, &conn, me, ctx->acked);
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
	__u64 eps = mplab_olia_epsilon(&conn, me);

	ctx->olia_num = (__s32)(__u32)(eps >> 32) - 1;
	ctx->olia_den = (__u32)eps;
	ctx->olia_inc = mplab_olia_inc(&conn, me, win.cwnd);
	if (ctx->event == EV_ACK) {
		mplab_olia_on_ack(&win, &conn, me, ctx->acked);
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

	mplab_balia_params(&conn, me, win.cwnd, win.mss, &balia);
	ctx->balia_ai = balia.ai;
	ctx->balia_md = balia.md;
	if (ctx->event == EV_ACK)
		mplab_balia_on_ack(&win, &conn, me, ctx->acked);
	else if (ctx->event == EV_LOSS)
		win.ssthresh = mplab_balia_ssthresh(&conn, me, win.cwnd, win.mss);
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
		mplab_wvegas_round(&win, &wv, &conn, me, ctx->acked);
	else if (ctx->event == EV_ACK && win.cwnd < win.ssthresh)
		win_slow_start(&win, ctx->acked);
	else if (ctx->event == EV_LOSS)
		win.ssthresh = reno_ssthresh(win.cwnd);
	store(ctx);
	return 0;
}

/* Vegas (single path): the same events as wVegas, with vegas.bpf.c's slow start between round ends. */
SEC("syscall")
int calc_vegas(struct calc_ctx *ctx)
{
	load(ctx);
	if (ctx->event == EV_SAMPLE)
		vegas_sample(&vg, ctx->rtt_us);
	else if (ctx->event == EV_ROUND)
		vegas_round(&win, &vg, ctx->acked);
	else if (ctx->event == EV_ACK && win.cwnd < win.ssthresh)
		win_slow_start(&win, ctx->acked);
	else if (ctx->event == EV_LOSS)
		win.ssthresh = reno_ssthresh(win.cwnd);
	store(ctx);
	return 0;
}
