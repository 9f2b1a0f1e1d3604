// SPDX-License-Identifier: GPL-2.0
/*
 * mplab_cubic_s<S>: Cubic (RFC 9438, as Linux's tcp_cubic.c runs it: beta 717/1024, C 410/1024,
 * fast convergence, TCP friendliness, HyStart with ACK trains and delay) whose clock runs S times
 * faster than the kernel's, for an emulated testbed that runs S times faster than real time.
 *
 * Cubic's window is a function of the time since the last reduction (the epoch). At speed-up S a
 * testbed's round trips are S times shorter but the kernel's clock is not, so the kernel's own Cubic
 * climbs S times too slowly per round trip. Here every time Cubic reads (the epoch, HyStart's round
 * and ACK-train times, the update throttle) comes from one clock, testbed_us(): the socket's own
 * timestamp (tcp_mstamp, microseconds, the clock the kernel's Cubic uses for HyStart) x S. Its
 * thresholds (HyStart's 2 ms ACK spacing and 4-16 ms delay band, the 1 s sample guard, the update
 * throttle of HZ/32 and once per jiffy) are then testbed time, as are the RTT samples (x S).
 * S = 1 is Linux's Cubic with a microsecond epoch clock instead of jiffies (as the kernel's BPF
 * port in tools/testing/selftests/bpf does).
 *
 * S is set when the object is registered, not compiled: harness/cc/cubic.py copies this object and
 * writes S into mplab_cubic_cfg (found by its magic number) and the name into the struct_ops map's
 * symbol and .name (the placeholder mplab_cubic_s00), so each S is its own object with its own
 * digest (a record's cc_impl: bpf:mplab_cubic_s8@sha256:...).
 *
 * mplab_cubic_trace keeps the last updates of the cubic function (the socket's raw clock beside the
 * scaled one and the curve's time t): what tests read back to show the curve runs S times faster.
 */
#include "mplab_cc.h"

#define CUBIC_BETA 717U          /* / 1024: the window kept at a loss */
#define CUBIC_BETA_SCALE 1024U
#define CUBIC_C_SCALED 410ULL    /* C = 0.4 as 410/1024 (tcp_cubic's bic_scale 41 x 10) */
#define CUBIC_TIME_SHIFT 10      /* the curve's time in 1/1024 s */
#define USEC_PER_SEC 1000000ULL
#define HYSTART_ACK_DELTA_US 2000U
#define HYSTART_MIN_SAMPLES 8
#define HYSTART_DELAY_MIN_US 4000U
#define HYSTART_DELAY_MAX_US 16000U
#define HYSTART_LOW_WINDOW 16U
#define GSO_MAX_BYTES 65536ULL
#define CUBIC_TRACE_LEN 4096

/* Written by harness/cc/cubic.py into a copy of this object (the magic marks the spot). */
const volatile struct {
	__u64 magic;
	__u32 speedup;   /* S: testbed time = the kernel's time x S */
	__u32 hz;        /* CONFIG_HZ: the throttles of tcp_cubic are in jiffies */
} mplab_cubic_cfg = { 0x6d706c6162637562ULL, 1, 250 };

/* Per-socket state (icsk_ca_priv). Times are testbed microseconds (testbed_us). */
struct mplab_cubic {
	__u64 epoch_us;       /* start of the current epoch (0: none) */
	__u64 last_us;        /* when cnt was last computed */
	__u64 round_us;       /* HyStart: start of the round */
	__u64 last_ack_us;    /* HyStart: last ACK of the train */
	__u32 cnt;            /* ACKs per one packet of window increase */
	__u32 w_max;          /* the window at the last reduction (after fast convergence) */
	__u32 last_cwnd;
	__u32 origin;         /* the curve's plateau */
	__u32 k;              /* time from the epoch's start to the plateau, 1/1024 s */
	__u32 delay_min_us;   /* smallest RTT seen, testbed us */
	__u32 ack_cnt;
	__u32 tcp_cwnd;       /* what Reno would have */
	__u32 end_seq;        /* HyStart: end of the round */
	__u32 curr_rtt_us;    /* HyStart: smallest RTT of the round */
	__u8 sample_cnt;
	__u8 found;
};

struct cubic_trace_rec {
	__u64 seq;
	__u64 wall_us;        /* tp->tcp_mstamp as the kernel keeps it */
	__u64 now_us;         /* testbed_us() */
	__u64 epoch_us;
	__u32 t;              /* the curve's time, 1/1024 s (delay_min included) */
	__u32 k;
	__u32 origin;
	__u32 target;
	__u32 cwnd;
	__u32 cnt;
	__u32 delay_min_us;
	__u16 port;           /* local port */
	__u16 dport;          /* peer port */
	__u32 speedup;        /* S of the object that wrote it (every S's object has a trace of this name) */
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, CUBIC_TRACE_LEN);
	__type(key, __u32);
	__type(value, struct cubic_trace_rec);
} mplab_cubic_trace SEC(".maps");

__u64 mplab_cubic_seq = 0;

static __always_inline struct mplab_cubic *cubic_of(const struct sock *sk)
{
	return (struct mplab_cubic *)inet_csk(sk)->icsk_ca_priv;
}

static __always_inline __u64 speedup(void)
{
	return mplab_cubic_cfg.speedup ? mplab_cubic_cfg.speedup : 1;
}

static __always_inline __u64 testbed_us(const struct sock *sk)
{
	return tcp_sk(sk)->tcp_mstamp * speedup();
}

static __always_inline __u64 usec_per_jiffy(void)
{
	return USEC_PER_SEC / (mplab_cubic_cfg.hz ? mplab_cubic_cfg.hz : 250);
}

static __always_inline int seq_after(__u32 a, __u32 b)
{
	return (__s32)(a - b) > 0;
}

/* Integer cube root of a (floor), one bit of the root per step (Hacker's Delight's icbrt64), without a
 * branch: each step's comparison is the sign of a difference (a < 2^62 keeps both sides below 2^63), so the
 * verifier walks one path, not one per outcome of 22 comparisons. A global function: verified once. */
MPLAB_GLOBAL __u32 mplab_cube_root(__u64 a)
{
	__u64 y = 0, b, ge;
	int s;

	if (a >= (1ULL << 62))
		a = (1ULL << 62) - 1;
#pragma unroll
	for (s = 63; s >= 0; s -= 3) {
		y <<= 1;
		b = 3 * y * (y + 1) + 1;
		ge = 1 ^ (((a >> s) - b) >> 63);
		a -= (b << s) * ge;
		y += ge;
	}
	return (__u32)y;
}

static __always_inline void cubic_forget(struct mplab_cubic *ca)
{
	ca->epoch_us = 0;
	ca->last_us = 0;
	ca->cnt = 0;
	ca->w_max = 0;
	ca->last_cwnd = 0;
	ca->origin = 0;
	ca->k = 0;
	ca->delay_min_us = 0;
	ca->ack_cnt = 0;
	ca->tcp_cwnd = 0;
	ca->found = 0;
}

static __always_inline void hystart_new_round(struct sock *sk, struct mplab_cubic *ca)
{
	ca->round_us = ca->last_ack_us = testbed_us(sk);
	ca->end_seq = tcp_sk(sk)->snd_nxt;
	ca->curr_rtt_us = ~0U;
	ca->sample_cnt = 0;
}

static __always_inline void trace(struct sock *sk, struct mplab_cubic *ca, __u64 now, __u64 t,
				  __u32 target, __u32 cwnd)
{
	__u64 seq = __sync_fetch_and_add(&mplab_cubic_seq, 1);
	__u32 slot = seq % CUBIC_TRACE_LEN;
	struct cubic_trace_rec *r = bpf_map_lookup_elem(&mplab_cubic_trace, &slot);

	if (!r)
		return;
	r->seq = seq + 1;
	r->wall_us = tcp_sk(sk)->tcp_mstamp;
	r->now_us = now;
	r->epoch_us = ca->epoch_us;
	r->t = (__u32)t;
	r->k = ca->k;
	r->origin = ca->origin;
	r->target = target;
	r->cwnd = cwnd;
	r->cnt = ca->cnt;
	r->delay_min_us = ca->delay_min_us;
	r->port = sk->__sk_common.skc_num;
	r->dport = bpf_ntohs(sk->__sk_common.skc_dport);
	r->speedup = (__u32)speedup();
}

/* ca->cnt for this ACK: the cubic curve's target one step ahead, bounded by Reno's growth. */
static __always_inline void cubic_update(struct sock *sk, struct mplab_cubic *ca, __u32 cwnd, __u32 acked)
{
	__u64 now = testbed_us(sk), t, offs, delta;
	__u32 target, reno_step;

	ca->ack_cnt += acked;
	if (ca->last_cwnd == cwnd && now - ca->last_us <= USEC_PER_SEC / 32)
		return;
	/* At most once per jiffy of testbed time, as tcp_cubic does per jiffy. */
	if (ca->epoch_us && now - ca->last_us < usec_per_jiffy())
		goto friendliness;
	ca->last_cwnd = cwnd;
	ca->last_us = now;
	if (!ca->epoch_us) {
		ca->epoch_us = now;
		ca->ack_cnt = acked;
		ca->tcp_cwnd = cwnd;
		if (ca->w_max <= cwnd) {
			ca->k = 0;
			ca->origin = cwnd;
		} else {
			/* K = cbrt((W_max - cwnd) / C) seconds, in 1/1024 s: cbrt(dW * 2^30 * 1024 / 410). */
			ca->k = mplab_cube_root((((__u64)(ca->w_max - cwnd)) << (3 * CUBIC_TIME_SHIFT + 10)) / CUBIC_C_SCALED);
			ca->origin = ca->w_max;
		}
	}
	/* The curve's time one minimum RTT ahead, in 1/1024 s of testbed time. */
	t = ((now - ca->epoch_us + ca->delay_min_us) << CUBIC_TIME_SHIFT) / USEC_PER_SEC;
	offs = t < ca->k ? ca->k - t : t - ca->k;
	if (offs > (1ULL << 21))  /* beyond ~34 min of testbed time the cube overflows: hold it there */
		offs = 1ULL << 21;
	delta = (CUBIC_C_SCALED * offs * offs * offs) >> (10 + 3 * CUBIC_TIME_SHIFT);
	if (t < ca->k)
		target = delta < ca->origin ? ca->origin - (__u32)delta : 0;
	else
		target = ca->origin + (__u32)(delta > 0x7fffffff ? 0x7fffffff : delta);
	ca->cnt = target > cwnd ? cwnd / (target - cwnd) : 100 * cwnd;
	/* Before the first loss the bandwidth is unknown: at least 5 % a round. */
	if (ca->w_max == 0 && ca->cnt > 20)
		ca->cnt = 20;
	trace(sk, ca, now, t, target, cwnd);

friendliness:
	/* Reno's window for the same ACKs (beta = 0.7: 3(1-b)/(1+b) packets a round, in ACKs per packet). */
	reno_step = (cwnd * (8 * (CUBIC_BETA_SCALE + CUBIC_BETA) / 3 / (CUBIC_BETA_SCALE - CUBIC_BETA))) >> 3;
	if (reno_step && ca->ack_cnt > reno_step) {
		__u32 n = ca->ack_cnt / reno_step;

		ca->ack_cnt -= n * reno_step;
		ca->tcp_cwnd += n;
	}
	if (ca->tcp_cwnd > cwnd) {
		__u32 bound = cwnd / (ca->tcp_cwnd - cwnd);

		if (ca->cnt > bound)
			ca->cnt = bound;
	}
	/* Never faster than 1.5 x a round. */
	if (ca->cnt < 2)
		ca->cnt = 2;
}

SEC("struct_ops")
void BPF_PROG(mplab_cubic_init, struct sock *sk)
{
	struct mplab_cubic *ca = cubic_of(sk);

	cubic_forget(ca);
	hystart_new_round(sk, ca);
}

SEC("struct_ops")
void BPF_PROG(mplab_cubic_cwnd_event, struct sock *sk, enum tcp_ca_event event)
{
	struct mplab_cubic *ca = cubic_of(sk);
	__u32 now_j, idle_j;
	__u64 idle_us, now;

	if (event != CA_EVENT_TX_START || !ca->epoch_us)
		return;
	/* Idle (application-limited) since the last send: move the epoch on by as long, in testbed time. */
	now_j = (__u32)bpf_jiffies64();
	idle_j = now_j - tcp_sk(sk)->lsndtime;
	if ((__s32)idle_j <= 0)
		return;
	idle_us = (__u64)idle_j * usec_per_jiffy() * speedup();
	now = testbed_us(sk);
	ca->epoch_us += idle_us;
	if (ca->epoch_us > now)
		ca->epoch_us = now;
}

SEC("struct_ops")
void BPF_PROG(mplab_cubic_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct mplab_cubic *ca = cubic_of(sk);

	if (!tcp_is_cwnd_limited(sk))
		return;
	if (tcp_in_slow_start(tp)) {
		acked = tcp_slow_start(tp, acked);
		if (!acked)
			return;
	}
	cubic_update(sk, ca, tp->snd_cwnd, acked);
	tcp_cong_avoid_ai(tp, ca->cnt, acked);
}

SEC("struct_ops")
__u32 BPF_PROG(mplab_cubic_ssthresh, struct sock *sk)
{
	const struct tcp_sock *tp = tcp_sk(sk);
	struct mplab_cubic *ca = cubic_of(sk);
	__u32 cwnd = tp->snd_cwnd;

	ca->epoch_us = 0;
	/* Fast convergence: a window that did not reach the last W_max yields some of it. */
	if (cwnd < ca->w_max)
		ca->w_max = (cwnd * (CUBIC_BETA_SCALE + CUBIC_BETA)) / (2 * CUBIC_BETA_SCALE);
	else
		ca->w_max = cwnd;
	cwnd = (cwnd * CUBIC_BETA) / CUBIC_BETA_SCALE;
	return cwnd > 2 ? cwnd : 2;
}

SEC("struct_ops")
void BPF_PROG(mplab_cubic_set_state, struct sock *sk, __u8 new_state)
{
	if (new_state == TCP_CA_Loss) {
		cubic_forget(cubic_of(sk));
		hystart_new_round(sk, cubic_of(sk));
	}
}

/* The cushion HyStart's ACK train allows for TSO/GRO batching: 4 x 64 KB at the pacing rate, at most 1 ms
 * (testbed time: the pacing rate is S x, so the wall time is S x too short). */
static __always_inline __u64 hystart_ack_cushion_us(const struct sock *sk)
{
	__u64 rate = sk->sk_pacing_rate, us;

	if (!rate)
		return 0;
	us = GSO_MAX_BYTES * 4 * USEC_PER_SEC / rate * speedup();
	return us < 1000 ? us : 1000;
}

static __always_inline void hystart_sample(struct sock *sk, struct mplab_cubic *ca, __u32 delay_us)
{
	struct tcp_sock *tp = tcp_sk(sk);
	__u64 now, threshold;
	__u32 band;

	if (seq_after(tp->snd_una, ca->end_seq))
		hystart_new_round(sk, ca);
	now = testbed_us(sk);
	/* ACK train: ACKs close together for longer than half the minimum RTT. */
	if (now - ca->last_ack_us <= HYSTART_ACK_DELTA_US) {
		ca->last_ack_us = now;
		threshold = ca->delay_min_us + hystart_ack_cushion_us(sk);
		if (sk->sk_pacing_status == SK_PACING_NONE)
			threshold >>= 1;
		if (now - ca->round_us > threshold) {
			ca->found = 1;
			tp->snd_ssthresh = tp->snd_cwnd;
		}
	}
	/* Delay: the round's smallest RTT above the minimum by an eighth of it (4-16 ms). */
	if (ca->curr_rtt_us > delay_us)
		ca->curr_rtt_us = delay_us;
	if (ca->sample_cnt < HYSTART_MIN_SAMPLES) {
		ca->sample_cnt++;
		return;
	}
	band = ca->delay_min_us >> 3;
	if (band < HYSTART_DELAY_MIN_US)
		band = HYSTART_DELAY_MIN_US;
	if (band > HYSTART_DELAY_MAX_US)
		band = HYSTART_DELAY_MAX_US;
	if (ca->curr_rtt_us > ca->delay_min_us + band) {
		ca->found = 1;
		tp->snd_ssthresh = tp->snd_cwnd;
	}
}

SEC("struct_ops")
void BPF_PROG(mplab_cubic_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	const struct tcp_sock *tp = tcp_sk(sk);
	struct mplab_cubic *ca = cubic_of(sk);
	__u64 delay;

	if (sample->rtt_us < 0)
		return;  /* a duplicate without a timestamp */
	/* The RTTs right after a reduction are skewed by the recovery: skip the epoch's first second. */
	if (ca->epoch_us && testbed_us(sk) - ca->epoch_us < USEC_PER_SEC)
		return;
	delay = (__u64)sample->rtt_us * speedup();
	if (!delay)
		delay = 1;
	if (delay > 0xffffffffULL)
		delay = 0xffffffffULL;
	if (!ca->delay_min_us || ca->delay_min_us > delay)
		ca->delay_min_us = (__u32)delay;
	if (!ca->found && tcp_in_slow_start(tp) && tp->snd_cwnd >= HYSTART_LOW_WINDOW)
		hystart_sample(sk, ca, (__u32)delay);
}

SEC("struct_ops")
__u32 BPF_PROG(mplab_cubic_undo_cwnd, struct sock *sk)
{
	return tcp_reno_undo_cwnd(sk);
}

/* Counts the ACKs that find a threshold or a window no callback returned (mplab_watch, mplab_cc.h). */
SEC("struct_ops")
void BPF_PROG(mplab_cubic_in_ack_event, struct sock *sk, __u32 flags)
{
	mplab_watch(sk);
}

/* The map's symbol and .name are the placeholder harness/cc/cubic.py renames per S (15 characters: the
 * longest name the kernel takes, mplab_cubic_s64). */
SEC(".struct_ops")
struct tcp_congestion_ops mplab_cubic_s00 = {
	.init = (void *)mplab_cubic_init,
	.ssthresh = (void *)mplab_cubic_ssthresh,
	.cong_avoid = (void *)mplab_cubic_cong_avoid,
	.set_state = (void *)mplab_cubic_set_state,
	.undo_cwnd = (void *)mplab_cubic_undo_cwnd,
	.cwnd_event = (void *)mplab_cubic_cwnd_event,
	.pkts_acked = (void *)mplab_cubic_pkts_acked,
	.in_ack_event = (void *)mplab_cubic_in_ack_event,
	.name = "mplab_cubic_s00",
};
