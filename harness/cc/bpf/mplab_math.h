/* SPDX-License-Identifier: GPL-2.0 */
/*
 * mplab: the window arithmetic and the per-event window updates of the coupled congestion
 * controls, as pure functions over plain structs.
 *
 * The struct_ops programs (lia/olia/balia/wvegas.bpf.c) copy the socket's window into a
 * struct mplab_win, call these, and copy it back; calc.bpf.c runs the very same functions
 * from syscall programs (BPF_PROG_TEST_RUN), so tests replay event sequences through them
 * and through a Python transliteration of the multipath-tcp.org kernel's modules
 * (harness/cc/oracle.py) and compare the windows after every event.
 *
 * The fixed point is the reference's (mptcp_coupled.c, mptcp_olia.c, mptcp_balia.c,
 * mptcp_wvegas.c of multipath-tcp.org v0.9x): the same scales, the same truncations, the
 * same u64 wrap-around, and RTTs in the unit the kernel keeps tp->srtt_us in (microseconds
 * << 3). Where mplab departs from the reference on purpose, the function says so and
 * docs/congestion-control.md gives the reason.
 *
 * Inputs are arrays of MPLAB_MAX_SF subflows; a subflow takes part when its window and
 * smoothed RTT are both non-zero (the reference's "can send"). No signed division (BPF v3).
 */
#ifndef MPLAB_MATH_H
#define MPLAB_MATH_H

#define MPLAB_MAX_SF 8

/* mptcp_coupled.c: alpha = (best_cwnd << 32) / (sum (cwnd << 10) best_rtt / rtt)^2; threshold (1 << 12) / alpha. */
#define LIA_SCALE_NUM 32
#define LIA_SCALE_DEN 10
#define LIA_SCALE 12
/* mptcp_olia.c: counter and window in 2^-10 packets. */
#define OLIA_SCALE 10
/* mptcp_balia.c: rates above 2^25 bytes/s are scaled down by 2^5 steps; alpha in 2^-10. */
#define BALIA_RATE_LIMIT 25
#define BALIA_SCALE_NUM 5
#define BALIA_ALPHA_SCALE 10
/* mptcp_wvegas.c: rates and weights with 16 fractional bits. */
#define WVEGAS_SCALE 16

struct mplab_sf {
	__u64 sk;        /* subflow socket (0: free slot) */
	__u32 cwnd;      /* packets; OLIA stores the window without fast-recovery inflation */
	__u32 srtt;      /* tp->srtt_us as the kernel keeps it: microseconds << 3 */
	__u64 rate;      /* wVegas: instant rate cwnd/rtt, 2^-16 packets per microsecond */
	__u32 loss_int;  /* OLIA: bytes acknowledged between losses (the larger of the last two intervals) */
	__u32 sampling;  /* wVegas: the subflow has RTT samples in its current round (sampled_rtt > 0) */
};

/* A connection's subflows (the coupling map's value). */
struct mplab_conn {
	struct mplab_sf sf[MPLAB_MAX_SF];
};

/* The part of a subflow's tcp_sock the updates read and write. */
struct mplab_win {
	__u32 cwnd;      /* tp->snd_cwnd */
	__u32 ssthresh;  /* tp->snd_ssthresh */
	__u32 cnt;       /* tp->snd_cwnd_cnt */
	__u32 clamp;     /* tp->snd_cwnd_clamp */
	__s32 olia_cnt;  /* OLIA's fractional counter (mptcp_snd_cwnd_cnt), 2^-10 packets */
	__u32 mss;       /* tp->mss_cache (BALIA's rates are in bytes/s) */
};

static __always_inline int sf_active(const struct mplab_sf *s)
{
	return s->sk && s->cwnd && s->srtt;
}

static __always_inline __u32 sf_count(const struct mplab_sf *sf)
{
	__u32 n = 0;
	int i;

#pragma unroll
	for (i = 0; i < MPLAB_MAX_SF; i++)
		if (sf_active(&sf[i]))
			n++;
	return n;
}

/* ---- the kernel's own window steps (net/ipv4/tcp_cong.c), on a struct mplab_win ---- */

/* tcp_slow_start: grow by the packets ACKed up to ssthresh; returns what is left over. */
static __always_inline __u32 win_slow_start(struct mplab_win *w, __u32 acked)
{
	__u32 cwnd = w->cwnd + acked;

	if (cwnd > w->ssthresh)
		cwnd = w->ssthresh;
	acked -= cwnd - w->cwnd;
	w->cwnd = cwnd < w->clamp ? cwnd : w->clamp;
	return acked;
}

/* tcp_cong_avoid_ai: one packet per n packets ACKed (credits from a higher n applied gently). */
static __always_inline void win_cong_avoid_ai(struct mplab_win *w, __u32 n, __u32 acked)
{
	__u32 delta;

	if (!n)
		n = 1;
	if (w->cnt >= n) {
		w->cnt = 0;
		w->cwnd++;
	}
	w->cnt += acked;
	if (w->cnt >= n) {
		delta = w->cnt / n;
		w->cnt -= delta * n;
		w->cwnd += delta;
	}
	if (w->cwnd > w->clamp)
		w->cwnd = w->clamp;
}

/* tcp_reno_cong_avoid, for a socket that is cwnd-limited. */
static __always_inline void win_reno(struct mplab_win *w, __u32 acked)
{
	if (w->cwnd < w->ssthresh) {
		acked = win_slow_start(w, acked);
		if (!acked)
			return;
	}
	win_cong_avoid_ai(w, w->cwnd, acked);
}

/* tcp_reno_ssthresh. */
static __always_inline __u32 reno_ssthresh(__u32 cwnd)
{
	return cwnd >> 1 > 2 ? cwnd >> 1 : 2;
}

/* ---- LIA (RFC 6356; mptcp_coupled.c) ---- */

/* mptcp_ccc_recalc_alpha: alpha with LIA_SCALE fractional bits (1 with one subflow; *n: subflows). */
static __always_inline __u64 lia_alpha_n(const struct mplab_sf *sf, __u32 *n)
{
	__u64 max_num = 0, sum = 0, best_cwnd = 0, best_rtt = 0, tmp, alpha;
	int i;

	*n = 0;
#pragma unroll
	for (i = 0; i < MPLAB_MAX_SF; i++) {
		if (!sf_active(&sf[i]))
			continue;
		(*n)++;
		tmp = ((__u64)sf[i].cwnd << LIA_SCALE_NUM) / ((__u64)sf[i].srtt * sf[i].srtt);
		if (tmp >= max_num) {   /* ties: the later path, as the reference */
			max_num = tmp;
			best_cwnd = sf[i].cwnd;
			best_rtt = sf[i].srtt;
		}
	}
	if (*n <= 1)
		return 1;
#pragma unroll
	for (i = 0; i < MPLAB_MAX_SF; i++) {
		if (!sf_active(&sf[i]))
			continue;
		sum += (((__u64)sf[i].cwnd << LIA_SCALE_DEN) * best_rtt) / sf[i].srtt;
	}
	sum *= sum;
	if (!sum)
		return 1;   /* unreachable with two active subflows (the reference would divide by zero) */
	alpha = (best_cwnd << LIA_SCALE_NUM) / sum;
	return alpha ? alpha : 1;
}

static __always_inline __u64 lia_alpha(const struct mplab_sf *sf)
{
	__u32 n;

	return lia_alpha_n(sf, &n);
}

/* ACKed packets per +1 packet in congestion avoidance: max((1 << 12) / alpha, cwnd); cwnd alone with one subflow. */
static __always_inline __u32 lia_ai_cnt(const struct mplab_sf *sf, __u32 cwnd)
{
	__u64 thr, alpha;
	__u32 n;

	alpha = lia_alpha_n(sf, &n);
	if (n <= 1)
		return cwnd;
	thr = (1ULL << LIA_SCALE) / alpha;
	return thr < cwnd ? cwnd : (__u32)thr;
}

/*
 * mptcp_ccc_cong_avoid for a cwnd-limited subflow whose slot in sf is up to date. Departures
 * from the reference: slow start while cwnd < ssthresh (the reference's `<=` never leaves it
 * on kernels whose tcp_slow_start stops at ssthresh), and ACKed packets counted (acked), not
 * calls, so a delayed or stretch ACK earns what its packets earn (RFC 6356 counts bytes).
 */
static __always_inline void lia_on_ack(struct mplab_win *w, const struct mplab_sf *sf, int me, __u32 acked)
{
	if (w->cwnd < w->ssthresh) {
		win_slow_start(w, acked);
		return;
	}
	win_cong_avoid_ai(w, lia_ai_cnt(sf, w->cwnd), acked);
}

/* ---- OLIA (Khalili et al.; mptcp_olia.c) ---- */

/* mptcp_get_epsilon for subflow me: *num in {-1, 0, 1}, *den > 0. */
static __always_inline void olia_epsilon(const struct mplab_sf *sf, int me, __s32 *num, __u32 *den)
{
	const struct mplab_sf *m = &sf[me & (MPLAB_MAX_SF - 1)];
	__u64 best_int = 0, best_rtt = 1, tmp_rtt, tmp_int;
	__u32 max_cwnd = 0, n = 0, n_m = 0, n_bm = 0;
	int i, m_best;

#pragma unroll
	for (i = 0; i < MPLAB_MAX_SF; i++) {
		if (!sf_active(&sf[i]))
			continue;
		n++;
		if (sf[i].cwnd > max_cwnd)
			max_cwnd = sf[i].cwnd;
		tmp_rtt = (__u64)sf[i].srtt * sf[i].srtt;
		tmp_int = sf[i].loss_int;
		/* best path: largest inter-loss bytes / rtt^2 (u64 products wrap as the reference's do) */
		if (tmp_int * best_rtt >= best_int * tmp_rtt) {
			best_rtt = tmp_rtt;
			best_int = tmp_int;
		}
	}
#pragma unroll
	for (i = 0; i < MPLAB_MAX_SF; i++) {
		if (!sf_active(&sf[i]))
			continue;
		if (sf[i].cwnd == max_cwnd)
			n_m++;
		else if ((__u64)sf[i].loss_int * best_rtt == best_int * ((__u64)sf[i].srtt * sf[i].srtt))
			n_bm++;
	}
	*num = 0;
	*den = 1;
	if (!n_bm)
		return;
	m_best = (__u64)m->loss_int * best_rtt == best_int * ((__u64)m->srtt * m->srtt);
	if (m->cwnd < max_cwnd && m_best) {
		*num = 1;
		*den = n * n_bm;
	} else if (m->cwnd == max_cwnd) {
		*num = -1;
		*den = n * n_m;
	}
}

/* The change of OLIA's counter for one call of mptcp_olia_cong_avoid, in 2^-10 packets (signed). */
static __always_inline __s64 olia_inc(const struct mplab_sf *sf, int me, __u32 cwnd)
{
	const struct mplab_sf *m = &sf[me & (MPLAB_MAX_SF - 1)];
	__u64 rate = 1, cs, inc_den, inc_num, sq;
	__s32 num;
	__u32 den;
	int i;

	olia_epsilon(sf, me, &num, &den);
	/* mptcp_get_rate: (1 + sum (w_p << 10) rtt_r / rtt_p)^2 */
#pragma unroll
	for (i = 0; i < MPLAB_MAX_SF; i++) {
		if (!sf_active(&sf[i]))
			continue;
		rate += (((__u64)sf[i].cwnd << OLIA_SCALE) * m->srtt) / sf[i].srtt;
	}
	rate *= rate;
	cs = (__u64)cwnd << OLIA_SCALE;
	inc_den = (__u64)(__u32)(den * cwnd) * rate;
	if (!inc_den)
		inc_den = 1;
	sq = (__u64)den * cs * cs;
	if (num == -1) {
		if (sq < rate)
			return -(__s64)(((rate - sq) << OLIA_SCALE) / inc_den);
		return (__s64)(((sq - rate) << OLIA_SCALE) / inc_den);
	}
	inc_num = (__u64)num * rate + sq;
	return (__s64)((inc_num << OLIA_SCALE) / inc_den);
}

/*
 * mptcp_olia_cong_avoid for a cwnd-limited subflow: the counter moves by olia_inc per ACKed
 * packet (the reference: per call; see lia_on_ack), and a full count is +1 or -1 packet.
 */
static __always_inline void olia_on_ack(struct mplab_win *w, const struct mplab_sf *sf, int me, __u32 acked)
{
	__s64 inc, cnt;

	if (w->cwnd < w->ssthresh) {
		win_slow_start(w, acked);
		return;
	}
	inc = olia_inc(sf, me, w->cwnd) * (__s64)acked;
	cnt = (__s64)w->olia_cnt + inc;
	if (cnt >= (1 << OLIA_SCALE) - 1) {
		if (w->cwnd < w->clamp)
			w->cwnd++;
		w->olia_cnt = 0;
	} else if (cnt <= -(1 << OLIA_SCALE) + 1) {
		w->cwnd = w->cwnd > 1 ? w->cwnd - 1 : 1;
		w->olia_cnt = 0;
	} else {
		w->olia_cnt = (__s32)cnt;
	}
}

/* mptcp_olia_set_state on a loss (Loss, Recovery, CWR): the markers shift unless nothing was ACKed since. */
static __always_inline void olia_on_loss(__u32 *loss1, __u32 *loss2, __u32 loss3, int retransmits)
{
	if (loss3 != *loss2 && !retransmits) {
		*loss1 = *loss2;
		*loss2 = loss3;
	}
}

static __always_inline __u32 olia_loss_int(__u32 loss1, __u32 loss2, __u32 loss3)
{
	__u32 a = loss3 - loss2, b = loss2 - loss1;

	return a > b ? a : b;
}

/* ---- BALIA (Peng et al.; mptcp_balia.c) ---- */

static __always_inline __u64 balia_rate(const struct mplab_sf *s, __u32 mss)
{
	return ((__u64)mss * s->cwnd * (1000000ULL << 3)) / s->srtt;
}

/*
 * mptcp_balia_recalc_ai for subflow me (window cwnd, segment size mss): *ai = ACKed packets
 * per +1 packet, *md = packets removed on a loss; both 0 with one subflow (Reno).
 *   ai = 10 w_r (sum x)^2 / ((x_r + x_max)(4 x_r + x_max)),  md = (w_r / 2) min(alpha, 1.5),
 * alpha = x_max / x_r truncated to an integer, as the reference does.
 */
static __always_inline void balia_params(const struct mplab_sf *sf, int me, __u32 cwnd, __u32 mss,
					 __u64 *ai, __u64 *md)
{
	__u64 x[MPLAB_MAX_SF], max_rate = 0, rate, sum = 0, tmp, alpha, a15;
	int i, k, n = 0, shift;

	*ai = 0;
	*md = 0;
#pragma unroll
	for (i = 0; i < MPLAB_MAX_SF; i++) {
		x[i] = sf_active(&sf[i]) ? balia_rate(&sf[i], mss) : 0;
		n += x[i] || sf_active(&sf[i]);
		sum += x[i];
		if (x[i] >= max_rate)   /* ties: the later path; inactive ones add nothing */
			max_rate = x[i];
	}
	rate = x[me & (MPLAB_MAX_SF - 1)];
	if (n <= 1 || !rate)
		return;
	alpha = max_rate / rate;
	/* a u64 is below 2^25 after at most 8 shifts by 5 */
	for (k = 0; k < 8 && max_rate > (1ULL << BALIA_RATE_LIMIT); k++)
		max_rate >>= BALIA_SCALE_NUM;
	if (k) {
		shift = BALIA_SCALE_NUM * k;
		sum = 0;
#pragma unroll
		for (i = 0; i < MPLAB_MAX_SF; i++)
			sum += x[i] >> shift;
		rate >>= shift;
	}
	sum *= sum;
	tmp = (sum * 10) / (rate + max_rate);
	tmp = (tmp * cwnd) / ((rate << 2) + max_rate);
	*ai = tmp ? tmp : cwnd;
	a15 = (3ULL << BALIA_ALPHA_SCALE) >> 1;
	alpha <<= BALIA_ALPHA_SCALE;
	*md = ((__u64)(cwnd >> 1) * (alpha < a15 ? alpha : a15)) >> BALIA_ALPHA_SCALE;
}

/* mptcp_balia_cong_avoid for a cwnd-limited subflow (slow start and counting: see lia_on_ack). */
static __always_inline void balia_on_ack(struct mplab_win *w, const struct mplab_sf *sf, int me, __u32 acked)
{
	__u64 ai, md;

	if (w->cwnd < w->ssthresh) {
		win_slow_start(w, acked);
		return;
	}
	balia_params(sf, me, w->cwnd, w->mss, &ai, &md);
	if (!ai || ai > 0xffffffffULL)
		ai = ai ? 0xffffffffULL : w->cwnd;
	win_cong_avoid_ai(w, (__u32)ai, acked);
}

/* mptcp_balia_ssthresh: cwnd - md (at least 1); Reno's halving with one subflow. */
static __always_inline __u32 balia_loss_ssthresh(const struct mplab_sf *sf, int me, __u32 cwnd, __u32 mss)
{
	__u64 ai, md;

	balia_params(sf, me, cwnd, mss, &ai, &md);
	if (!ai)
		return reno_ssthresh(cwnd);   /* one subflow */
	return cwnd > md + 1 ? cwnd - (__u32)md : 1;
}

/* ---- wVegas (Cao et al.; mptcp_wvegas.c) ---- */

#define WVEGAS_INITIAL_ALPHA 2
#define WVEGAS_TOTAL_ALPHA 10
#define WVEGAS_GAMMA 1

struct wvegas_state {
	__u64 rate;         /* instant_rate: cwnd / rtt at the last update, 2^-16 packets per microsecond */
	__u64 weight;       /* share of the connection's rate, 2^-16 */
	__u32 base_rtt;     /* smallest RTT sample + 1, microseconds */
	__u32 sampled_rtt;  /* sum of this round's samples */
	__u32 cnt_rtt;      /* samples this round */
	__u32 alpha;
	__u32 queue_delay;
	__u32 doing;        /* doing_wvegas_now */
};

/* wvegas_enable (the round's state; base_rtt is kept). */
static __always_inline void wvegas_reset(struct wvegas_state *st)
{
	st->doing = 1;
	st->rate = 0;
	st->cnt_rtt = 0;
	st->sampled_rtt = 0;
	st->alpha = WVEGAS_INITIAL_ALPHA;
	st->weight = 1ULL << WVEGAS_SCALE;
	st->queue_delay = 0;
}

/* mptcp_wvegas_pkts_acked: one RTT sample (microseconds). */
static __always_inline void wvegas_sample(struct wvegas_state *st, __u32 rtt_us)
{
	__u32 vrtt = rtt_us + 1;

	if (vrtt < st->base_rtt)
		st->base_rtt = vrtt;
	st->sampled_rtt += vrtt;
	st->cnt_rtt++;
}

/*
 * The end of a delay-based round (wVegas, Vegas): the window kept within [2, clamp], then ssthresh
 * raised to tcp_current_ssthresh's value in CA_Open (3/4 of the window) when it is below it.
 */
static __always_inline void win_round_end(struct mplab_win *w)
{
	__u32 alt;

	if (w->cwnd < 2)
		w->cwnd = 2;
	else if (w->cwnd > w->clamp)
		w->cwnd = w->clamp;
	alt = (w->cwnd >> 1) + (w->cwnd >> 2);
	if (w->ssthresh < alt)
		w->ssthresh = alt;
}

/* mptcp_wvegas_weight: this subflow's rate over the connection's (rates of subflows sampling this round). */
static __always_inline __u64 wvegas_weight(const struct mplab_sf *sf, int me, __u64 my_rate, __u64 prev)
{
	__u64 total = 0;
	int i;

#pragma unroll
	for (i = 0; i < MPLAB_MAX_SF; i++) {
		if (i == (me & (MPLAB_MAX_SF - 1)))
			total += my_rate;
		else if (sf[i].sk && sf[i].sampling)
			total += sf[i].rate;
	}
	if (total && my_rate)
		return (my_rate << WVEGAS_SCALE) / total;
	return prev;
}

/* wVegas' backlog estimate diff = cwnd (rtt - base_rtt) / rtt, in packets. */
static __always_inline __u32 wvegas_diff(__u32 cwnd, __u32 base_rtt_us, __u32 rtt_us)
{
	if (!rtt_us || rtt_us <= base_rtt_us)
		return 0;
	return (__u32)(((__u64)cwnd * (rtt_us - base_rtt_us)) / rtt_us);
}

/*
 * The end of a wVegas round (mptcp_wvegas_cong_avoid when the ACK passes beg_snd_nxt), for a
 * subflow in CA_Open (st->rate is what it publishes as its rate). Departure from the reference:
 * no backoff when the queueing delay is zero (there `0 >= 2 * 0` halves the window of an idle path).
 */
static __always_inline void wvegas_round(struct mplab_win *w, struct wvegas_state *st, const struct mplab_sf *sf,
					 int me, __u32 acked)
{
	__u32 rtt, diff, q_delay, backoff;
	__u64 target;

	if (st->cnt_rtt <= 2) {
		win_reno(w, acked);
	} else {
		rtt = st->sampled_rtt / st->cnt_rtt;
		target = ((__u64)w->cwnd * st->base_rtt) / rtt;
		diff = wvegas_diff(w->cwnd, st->base_rtt, rtt);
		if (diff > WVEGAS_GAMMA && w->cwnd < w->ssthresh) {
			if ((__u32)target + 1 < w->cwnd)
				w->cwnd = (__u32)target + 1;
			if (w->cwnd - 1 < w->ssthresh)
				w->ssthresh = w->cwnd - 1;
		} else if (w->cwnd < w->ssthresh) {
			win_slow_start(w, acked);
		} else {
			if (diff >= st->alpha) {
				st->rate = ((__u64)w->cwnd << WVEGAS_SCALE) / rtt;
				st->weight = wvegas_weight(sf, me, st->rate, st->weight);
				st->alpha = (__u32)((st->weight * WVEGAS_TOTAL_ALPHA) >> WVEGAS_SCALE);
				if (st->alpha < 2)
					st->alpha = 2;
			}
			if (diff > st->alpha) {
				w->cwnd--;
				if (w->cwnd - 1 < w->ssthresh)
					w->ssthresh = w->cwnd - 1;
			} else if (diff < st->alpha) {
				w->cwnd++;
			}
			q_delay = rtt - st->base_rtt;
			if (!st->queue_delay || st->queue_delay > q_delay)
				st->queue_delay = q_delay;
			if (q_delay && q_delay >= 2 * st->queue_delay) {
				backoff = (__u32)(((__u64)st->base_rtt << WVEGAS_SCALE) / (2 * rtt));
				w->cwnd = (__u32)(((__u64)w->cwnd * backoff) >> WVEGAS_SCALE);
				st->queue_delay = 0;
			}
		}
		win_round_end(w);
	}
	st->cnt_rtt = 0;
	st->sampled_rtt = 0;
}

/*
 * The per-event updates as global (non-inlined) functions: the verifier checks each once, on
 * its own, instead of inside every caller, which keeps the coupled .cong_avoid programs within
 * its budget. Pointers into a global function may be NULL as far as the verifier knows.
 */
#define MPLAB_GLOBAL __attribute__((noinline))

MPLAB_GLOBAL int mplab_lia_on_ack(struct mplab_win *w, const struct mplab_conn *c, int me, __u32 acked)
{
	/* (me is unused by LIA; testing it keeps clang from leaving the argument register unset) */
	if (!w || !c || me < 0)
		return 0;
	lia_on_ack(w, c->sf, me, acked);
	return 0;
}

MPLAB_GLOBAL int mplab_olia_on_ack(struct mplab_win *w, const struct mplab_conn *c, int me, __u32 acked)
{
	if (!w || !c)
		return 0;
	olia_on_ack(w, c->sf, me, acked);
	return 0;
}

MPLAB_GLOBAL int mplab_balia_on_ack(struct mplab_win *w, const struct mplab_conn *c, int me, __u32 acked)
{
	if (!w || !c)
		return 0;
	balia_on_ack(w, c->sf, me, acked);
	return 0;
}

MPLAB_GLOBAL __u32 mplab_balia_ssthresh(const struct mplab_conn *c, int me, __u32 cwnd, __u32 mss)
{
	if (!c)
		return reno_ssthresh(cwnd);
	return balia_loss_ssthresh(c->sf, me, cwnd, mss);
}

/* The arithmetic alone, for calc.bpf.c's outputs (the tests compare it with the reference's). */
MPLAB_GLOBAL __u64 mplab_lia_alpha(const struct mplab_conn *c)
{
	return c ? lia_alpha(c->sf) : 0;
}

MPLAB_GLOBAL __u32 mplab_lia_ai_cnt(const struct mplab_conn *c, __u32 cwnd)
{
	return c ? lia_ai_cnt(c->sf, cwnd) : 0;
}

/* OLIA's epsilon packed as (num + 1) << 32 | den. */
MPLAB_GLOBAL __u64 mplab_olia_epsilon(const struct mplab_conn *c, int me)
{
	__s32 num;
	__u32 den;

	if (!c)
		return 0;
	olia_epsilon(c->sf, me, &num, &den);
	return ((__u64)(__u32)(num + 1) << 32) | den;
}

MPLAB_GLOBAL __s64 mplab_olia_inc(const struct mplab_conn *c, int me, __u32 cwnd)
{
	return c ? olia_inc(c->sf, me, cwnd) : 0;
}

struct balia_out {
	__u64 ai;
	__u64 md;
};

MPLAB_GLOBAL int mplab_balia_params(const struct mplab_conn *c, int me, __u32 cwnd, __u32 mss, struct balia_out *out)
{
	if (!c || !out)
		return 0;
	balia_params(c->sf, me, cwnd, mss, &out->ai, &out->md);
	return 0;
}

MPLAB_GLOBAL int mplab_wvegas_round(struct mplab_win *w, struct wvegas_state *st, const struct mplab_conn *c,
				    int me, __u32 acked)
{
	if (!w || !st || !c)
		return 0;
	wvegas_round(w, st, c->sf, me, acked);
	return 0;
}

/* ---- Vegas (Linux net/ipv4/tcp_vegas.c): single path, the competitor wVegas is measured against ---- */

/* tcp_vegas.c's module parameters at their defaults: packets queued in the network. */
#define VEGAS_ALPHA 2
#define VEGAS_BETA 4
#define VEGAS_GAMMA 1

/* struct vegas (tcp_vegas.h) without beg_snd_nxt, which the struct_ops keeps beside it. */
struct vegas_state {
	__u32 base_rtt;   /* baseRTT: smallest RTT sample + 1 ever seen, microseconds */
	__u32 min_rtt;    /* minRTT: smallest sample + 1 of this round */
	__u32 cnt_rtt;    /* cntRTT: samples this round */
	__u32 doing;      /* doing_vegas_now */
};

/* vegas_enable (beg_snd_nxt is the caller's); tcp_vegas_init also forgets base_rtt. */
static __always_inline void vegas_enable(struct vegas_state *st)
{
	st->doing = 1;
	st->cnt_rtt = 0;
	st->min_rtt = 0x7fffffff;
}

/* tcp_vegas_pkts_acked: one RTT sample (microseconds); "+ 1" so that neither is ever 0. */
static __always_inline void vegas_sample(struct vegas_state *st, __u32 rtt_us)
{
	__u32 vrtt = rtt_us + 1;

	if (vrtt < st->base_rtt)
		st->base_rtt = vrtt;
	if (vrtt < st->min_rtt)
		st->min_rtt = vrtt;
	st->cnt_rtt++;
}

/*
 * tcp_vegas_cong_avoid for the ACK that ends a round (after(ack, beg_snd_nxt)), on a socket in
 * CA_Open that is cwnd-limited (with at most 2 samples the kernel's Reno step, which does nothing
 * otherwise; the struct_ops program skips it then). diff is the kernel's u32 expression, over
 * base_rtt (not rtt as in wVegas).
 */
static __always_inline void vegas_round(struct mplab_win *w, struct vegas_state *st, __u32 acked)
{
	__u32 rtt, diff;
	__u64 target;

	if (st->cnt_rtt <= 2) {
		win_reno(w, acked);
	} else {
		rtt = st->min_rtt;
		target = ((__u64)w->cwnd * st->base_rtt) / rtt;
		diff = w->cwnd * (rtt - st->base_rtt) / st->base_rtt;
		if (diff > VEGAS_GAMMA && w->cwnd < w->ssthresh) {
			/* slow-start exit: the window that matches the actual rate, + 1 */
			if ((__u32)target + 1 < w->cwnd)
				w->cwnd = (__u32)target + 1;
			if (w->cwnd < w->ssthresh)   /* tcp_vegas_ssthresh: min(ssthresh, cwnd) */
				w->ssthresh = w->cwnd;
		} else if (w->cwnd < w->ssthresh) {
			win_slow_start(w, acked);
		} else if (diff > VEGAS_BETA) {
			w->cwnd--;
			if (w->cwnd < w->ssthresh)
				w->ssthresh = w->cwnd;
		} else if (diff < VEGAS_ALPHA) {
			w->cwnd++;
		}
		win_round_end(w);
	}
	st->cnt_rtt = 0;
	st->min_rtt = 0x7fffffff;
}

#endif
