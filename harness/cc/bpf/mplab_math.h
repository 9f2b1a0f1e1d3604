/* SPDX-License-Identifier: GPL-2.0 */
/*
 * mplab: the window arithmetic of the coupled congestion controls, as pure functions.
 *
 * Shared by the struct_ops programs (lia/olia/balia/wvegas.bpf.c) and by calc.bpf.c,
 * whose syscall programs let tests run exactly this code on chosen windows and RTTs
 * and compare it with a user-space reference computation of the papers' equations.
 *
 * Inputs are arrays of MPLAB_MAX_SF subflows; a subflow takes part when its window
 * and smoothed RTT are both non-zero (the multipath-tcp.org kernel's "can send").
 * Windows are in packets, RTTs in microseconds. No signed division (clang 14 / BPF v3).
 */
#ifndef MPLAB_MATH_H
#define MPLAB_MATH_H

#define MPLAB_MAX_SF 8

/* OLIA's per-ACK increment is counted in 1/2^16 of a packet. */
#define OLIA_SCALE 16
/* wVegas rates and weights are fixed point with 16 fractional bits (as mptcp_wvegas.c). */
#define WVEGAS_SCALE 16

struct mplab_sf {
	__u64 sk;        /* subflow socket (0: free slot) */
	__u32 cwnd;      /* packets; OLIA stores the window without fast-recovery inflation */
	__u32 srtt_us;   /* smoothed RTT, microseconds */
	__u64 rate;      /* wVegas: instant rate cwnd/rtt, 2^-16 packets per microsecond */
	__u32 loss_int;  /* OLIA: bytes acknowledged between the last two losses (the larger of the last two) */
	__u32 pad;
};

static __always_inline int sf_active(const struct mplab_sf *s)
{
	return s->sk && s->cwnd && s->srtt_us;
}

/*
 * LIA (RFC 6356, section 3): on each ACK on subflow i,
 *   cwnd_i += min(alpha / cwnd_total, 1 / cwnd_i)   with
 *   alpha = cwnd_total * max_j(cwnd_j / rtt_j^2) / (sum_j cwnd_j / rtt_j)^2.
 * Returned as the number of ACKed packets that earn +1 packet:
 *   max(cwnd_total / alpha, cwnd_i) = max((sum_j cwnd_j rtt_b / rtt_j)^2 / cwnd_b, cwnd_i),
 * b being the path with the largest cwnd/rtt^2 (10 fractional bits in the sum).
 */
static __always_inline __u32 lia_ai_cnt(const struct mplab_sf *sf, int me)
{
	__u64 best_num = 0, best_cwnd = 0, best_rtt = 0, sum = 0, cnt;
	__u32 my_cwnd = sf[me & (MPLAB_MAX_SF - 1)].cwnd;
	int i, n = 0;

#pragma unroll
	for (i = 0; i < MPLAB_MAX_SF; i++) {
		__u64 num;

		if (!sf_active(&sf[i]))
			continue;
		n++;
		/* cwnd / rtt^2 compared without division: a/b >= c/d  <=>  a*d >= c*b */
		num = (__u64)sf[i].cwnd;
		if (!best_cwnd || num * best_rtt * best_rtt >= best_cwnd * sf[i].srtt_us * (__u64)sf[i].srtt_us) {
			best_cwnd = sf[i].cwnd;
			best_rtt = sf[i].srtt_us;
		}
	}
	if (n <= 1 || !best_cwnd)
		return my_cwnd ? my_cwnd : 1;   /* one subflow: Reno */
#pragma unroll
	for (i = 0; i < MPLAB_MAX_SF; i++) {
		if (!sf_active(&sf[i]))
			continue;
		sum += (((__u64)sf[i].cwnd << 10) * best_rtt) / sf[i].srtt_us;
	}
	cnt = ((sum * sum) >> 20) / best_cwnd;
	(void)best_num;
	if (cnt < my_cwnd)
		cnt = my_cwnd;
	if (!cnt)
		cnt = 1;
	return cnt > 0xffffffffULL ? 0xffffffffU : (__u32)cnt;
}

/*
 * OLIA (Khalili et al., ToN 2013, eq. 4): on each ACK on path r,
 *   w_r += (w_r / rtt_r^2) / (sum_p w_p / rtt_p)^2 + eps_r / w_r
 * with eps_r from the sets M (paths with the largest window) and B (best paths by
 * l_p^2 / rtt_p^2 ... the reference kernel compares l_p / rtt_p^2, and so do we):
 *   r in B\M:  eps_r = +1 / (|R| |B\M|);  r in M and B\M non-empty: eps_r = -1 / (|R| |M|);  else 0.
 * Returns the increment for one ACKed packet, in 1/2^16 packets (signed).
 */
static __always_inline __s64 olia_inc(const struct mplab_sf *sf, int me)
{
	__u64 best_int = 0, best_rtt2 = 1, t = 0, term1, max_cwnd = 0;
	const struct mplab_sf *m = &sf[me & (MPLAB_MAX_SF - 1)];
	__u32 n = 0, n_m = 0, n_bm = 0;
	int i, in_m, in_bm;

	if (!sf_active(m))
		return 0;
#pragma unroll
	for (i = 0; i < MPLAB_MAX_SF; i++) {
		__u64 rtt2;

		if (!sf_active(&sf[i]))
			continue;
		n++;
		if (sf[i].cwnd > max_cwnd)
			max_cwnd = sf[i].cwnd;
		rtt2 = (__u64)sf[i].srtt_us * sf[i].srtt_us;
		/* best: largest loss_int / rtt^2 (ties: the later path, as the reference) */
		if ((__u64)sf[i].loss_int * best_rtt2 >= best_int * rtt2) {
			best_int = sf[i].loss_int;
			best_rtt2 = rtt2;
		}
	}
#pragma unroll
	for (i = 0; i < MPLAB_MAX_SF; i++) {
		__u64 rtt2;

		if (!sf_active(&sf[i]))
			continue;
		if (sf[i].cwnd == max_cwnd) {
			n_m++;
		} else {
			rtt2 = (__u64)sf[i].srtt_us * sf[i].srtt_us;
			if ((__u64)sf[i].loss_int * best_rtt2 == best_int * rtt2)
				n_bm++;
		}
		/* T = sum_p w_p rtt_r / rtt_p, 10 fractional bits */
		t += (((__u64)sf[i].cwnd << 10) * m->srtt_us) / sf[i].srtt_us;
	}
	if (t > (1ULL << 31))
		t = 1ULL << 31;   /* keeps t*t in 64 bits; only reached with absurd RTT ratios */
	if (!t)
		t = 1;
	/* (w_r / rtt_r^2) / (sum w_p/rtt_p)^2 = w_r / T^2 */
	term1 = ((__u64)m->cwnd << (OLIA_SCALE + 20)) / (t * t);
	in_m = m->cwnd == max_cwnd;
	in_bm = !in_m && (__u64)m->loss_int * best_rtt2 == best_int * ((__u64)m->srtt_us * m->srtt_us);
	if (n_bm && in_bm)
		return (__s64)term1 + (__s64)((1ULL << OLIA_SCALE) / ((__u64)n * n_bm * m->cwnd));
	if (n_bm && in_m)
		return (__s64)term1 - (__s64)((1ULL << OLIA_SCALE) / ((__u64)n * n_m * m->cwnd));
	return (__s64)term1;
}

/*
 * BALIA (Peng et al., ToN 2016): with x_k = w_k / rtt_k and alpha_r = max_k x_k / x_r,
 *   per ACK on r:  w_r += (x_r / (rtt_r (sum_k x_k)^2)) * (1 + alpha_r)/2 * (4 + alpha_r)/5
 *   per loss:      w_r -= (w_r / 2) * min(alpha_r, 1.5)
 * The increase is returned as ACKed packets per +1 packet:
 *   10 w_r (sum x)^2 / ((x_r + x_max)(4 x_r + x_max)).
 */
static __always_inline __u64 balia_rate(const struct mplab_sf *s)
{
	return ((__u64)s->cwnd << 16) / s->srtt_us;
}

static __always_inline __u32 balia_ai_cnt(const struct mplab_sf *sf, int me)
{
	const struct mplab_sf *m = &sf[me & (MPLAB_MAX_SF - 1)];
	__u64 sum = 0, max = 0, x, a, b, cnt;
	int i, n = 0;

	if (!sf_active(m))
		return m->cwnd ? m->cwnd : 1;
#pragma unroll
	for (i = 0; i < MPLAB_MAX_SF; i++) {
		if (!sf_active(&sf[i]))
			continue;
		n++;
		x = balia_rate(&sf[i]);
		sum += x;
		if (x > max)
			max = x;
	}
	x = balia_rate(m);
	if (n <= 1 || !x)
		return m->cwnd;
	/* (sum/(x+max)) and (sum/(4x+max)) are at most n: 10 fractional bits each */
	a = (sum << 10) / (x + max);
	b = (sum << 10) / (4 * x + max);
	cnt = (10 * (__u64)m->cwnd * a * b) >> 20;
	if (!cnt)
		cnt = 1;
	return cnt > 0xffffffffULL ? 0xffffffffU : (__u32)cnt;
}

/* BALIA's multiplicative decrease: packets to remove from w_r on a loss. */
static __always_inline __u32 balia_md(const struct mplab_sf *sf, int me)
{
	const struct mplab_sf *m = &sf[me & (MPLAB_MAX_SF - 1)];
	__u64 max = 0, x, alpha;
	int i, n = 0;

	if (!sf_active(m))
		return m->cwnd >> 1;
#pragma unroll
	for (i = 0; i < MPLAB_MAX_SF; i++) {
		if (!sf_active(&sf[i]))
			continue;
		n++;
		x = balia_rate(&sf[i]);
		if (x > max)
			max = x;
	}
	x = balia_rate(m);
	if (n <= 1 || !x)
		return m->cwnd >> 1;
	alpha = (max << 10) / x;             /* 10 fractional bits */
	if (alpha > (3 << 9))
		alpha = 3 << 9;                  /* min(alpha, 1.5) */
	return (__u32)((((__u64)m->cwnd) * alpha) >> 11);   /* w/2 * alpha */
}

/*
 * wVegas (Cao et al., ICNP 2012): each subflow's share of the total alpha follows its
 * share of the connection's rate: alpha_r = max(2, total_alpha * rate_r / sum rate).
 */
static __always_inline __u32 wvegas_alpha(const struct mplab_sf *sf, int me, __u32 total_alpha)
{
	const struct mplab_sf *m = &sf[me & (MPLAB_MAX_SF - 1)];
	__u64 total = 0, weight, alpha;
	int i;

#pragma unroll
	for (i = 0; i < MPLAB_MAX_SF; i++) {
		if (sf[i].sk && sf[i].rate)
			total += sf[i].rate;
	}
	if (!total || !m->rate)
		weight = 1ULL << WVEGAS_SCALE;
	else
		weight = (m->rate << WVEGAS_SCALE) / total;
	alpha = (weight * total_alpha) >> WVEGAS_SCALE;
	return alpha < 2 ? 2 : (__u32)alpha;
}

/* wVegas: the backlog estimate diff = cwnd (rtt - base_rtt) / rtt, in packets. */
static __always_inline __u32 wvegas_diff(__u32 cwnd, __u32 base_rtt_us, __u32 rtt_us)
{
	if (!rtt_us || rtt_us <= base_rtt_us)
		return 0;
	return (__u32)(((__u64)cwnd * (rtt_us - base_rtt_us)) / rtt_us);
}

#endif
