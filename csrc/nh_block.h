/*
 * Internal: a block of lanes in struct-of-arrays form and the helpers every scheme shares.
 * Not part of the kernel ABI.
 */
#ifndef NH_BLOCK_H
#define NH_BLOCK_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nh_core.h"

/* Hot loops are compiled for AVX-512, AVX2 and the baseline on x86-64 Linux (glibc ifunc). No FMA
 * contraction is enabled, so every clone gives the same bits. */
#if defined(__GNUC__) && defined(__x86_64__) && defined(__linux__) && defined(__GLIBC__) && \
    !defined(NH_NO_CLONES)
#define NH_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define NH_CLONES
#endif

/* Lanes are processed in chunks of NH_CHUNK with the chunk's accumulators in registers; a
 * block's SoA stride is padded to a multiple of NH_CHUNK with inactive copies of lane 0. The
 * kernels run on the block's own slots only (nw of them, see nh_block): a block of one
 * trajectory evaluates the vector field for one lane, not NH_CHUNK. */
#define NH_CHUNK 8

/* NH_VW lanes (half a chunk) as one value: GCC/Clang vector extensions, one AVX2 register
 * (two SSE2 registers). A whole chunk as one 8-wide value is lowered through the stack when
 * the clone has no 512-bit registers (measured: the DOP853 stage sums spent most of their
 * time moving spilled halves through general registers); a plain loop elsewhere. */
#define NH_VW 4
#if defined(__GNUC__) || defined(__clang__)
typedef double nh_vec __attribute__((vector_size(NH_VW * sizeof(double))));
static inline nh_vec nh_ld(const double *p) {
    nh_vec v;
    memcpy(&v, p, sizeof v);
    return v;
}
static inline void nh_st(double *p, nh_vec v) { memcpy(p, &v, sizeof v); }
static inline nh_vec nh_splat(double a) { return a - (nh_vec){0}; }
/* the same lanes as 64-bit integers: masks of comparisons, bit operations */
typedef long long nh_ivec __attribute__((vector_size(NH_VW * sizeof(long long))));
static inline nh_ivec nh_isplat(long long a) { return a - (nh_ivec){0}; }
#define NH_HAVE_VEC 1
#else
#define NH_HAVE_VEC 0
#endif

#if defined(__GNUC__) || defined(__clang__)
#define NH_INLINE static inline __attribute__((always_inline))
#else
#define NH_INLINE static inline
#endif

#define NH_MAX(a, b) ((a) > (b) ? (a) : (b))
#define NH_MIN(a, b) ((a) < (b) ? (a) : (b))

/* Events located on DOP853's continuous extension (needs dense output) or on the Taylor
 * series of method NH_TAYLOR: g = fn(t, x, par),
 * nev values per lane in the kernel ABI (out[j * stride + l]). Event j fires where g_j changes
 * sign over an accepted step in its direction (+1: from < 0 to >= 0, -1: from > 0 to <= 0,
 * 0: either); its time is found on the step's interpolant by a bracketing (Illinois /
 * bisection) iteration to round-off. Records go to t/which/y of the trajectory in time order,
 * at most cap of them (count[g] counts all); a terminal event ends its trajectory there (status
 * OK, t_end the event time, later outputs NaN). */
typedef struct nh_events {
    nh_kernel_fn fn;
    void *ctx;
    int64_t nev;
    const int32_t *direction; /* [nev] */
    const int32_t *terminal;  /* [nev] */
    int64_t cap;              /* records kept per trajectory (>= 1) */
    double *t;                /* [ntraj][cap] event times */
    int32_t *which;           /* [ntraj][cap] event index */
    double *y;                /* [ntraj][cap][n] states at the events */
    int64_t *count;           /* [ntraj] events found (may exceed cap) */
} nh_events;

struct nh_block {
    const nh_system *sys;
    const nh_options *opt;
    const double *t_eval;
    int64_t nt;
    int64_t n;      /* state dimension */
    int64_t nl;     /* lane slots, a multiple of NH_CHUNK (the SoA stride) */
    int64_t nw;     /* slots in use (the block's width, <= nl): trajectories go only to slots
                       l < nw and the kernels are called for lanes 0..nw-1; slots nw..nl-1
                       are padding, never active, their buffers zero (finite) throughout */
    int64_t *gid;   /* [nl] trajectory held by each slot, -1 when the slot is idle */
    int64_t next, end;    /* trajectories next..end-1 still wait for a slot */
    int64_t *shared;      /* non-NULL: the batch's next trajectory, one counter for the blocks of
                             all threads (b->next is then unused); see nh_take */
    const double *x0;     /* global initial states [ntraj][n] */
    const double *par_in; /* global parameters, row of trajectory g at g * par_stride */
    int64_t par_stride;
    double *par;    /* [npar + nderived][nl]: the parameters, then the derived ones */
    int err;        /* NH_OK, or the code of a failed derive call (the run then stops) */
    double *x;      /* [n][nl] current state */
    double *tl;     /* [nl] current time per lane */
    int64_t *kout;  /* [nl] index of the next output time */
    unsigned char *active; /* [nl] 1 while the lane still integrates */
    double *y;      /* global outputs [ntraj][nt][n] */
    int32_t *status; /* global */
    int64_t *stats;  /* global [ntraj][NH_NSTATS] */
    double *t_end;   /* NULL, or global [ntraj]: time each trajectory reached */
    double *x_end;   /* NULL, or global [ntraj][n]: the state at t_end */
    int64_t *cnt;    /* [NH_NSTATS][nl] block-local counters, added to stats at the end */
    int64_t ncalls;  /* vector-field calls made for all active slots (see nh_rhs) */
    int64_t *call0;  /* [nl] ncalls when the slot took its trajectory */
    int dense;       /* DOP853: output times from the continuous extension, steps not
                        shortened to them (only to the last one); see nh_integrate_block_ex.
                        Taylor: ignored (its outputs always come from the series) */
    const nh_events *ev; /* NULL, or events to locate (DOP853 dense, or Taylor) */
    int poll_tick;       /* calls of nh_stopping before it runs the poll hook again */
};

static inline int64_t nh_count_active(const nh_block *b) {
    int64_t c = 0;
    for (int64_t l = 0; l < b->nl; ++l) c += b->active[l];
    return c;
}

static inline int64_t *nh_cnt(nh_block *b, int k) { return b->cnt + k * b->nl; }

/* Evaluate the vector field on the block for all active slots: one evaluation each, counted
 * once for the block (a slot's share is ncalls minus its call0). */
static inline int nh_rhs(nh_block *b, const double *t, const double *x, double *out) {
    b->ncalls += 1;
    return b->sys->rhs(b->sys->ctx, t, x, b->par, out, b->nw, b->nl);
}

/* Stage state: out = x + hu[l] * sum_j a[j] K[idx[j]] over the `s` nonzero coefficients
 * (SoA, n components, nl lanes, nl a multiple of NH_CHUNK). */
NH_INLINE void nh_stage(int64_t n, int64_t nl, double *restrict out, const double *restrict x,
                        const double *restrict hu, const double *a, const int *idx, int s,
                        double *const *K) {
#if NH_HAVE_VEC
    for (int64_t l0 = 0; l0 < nl; l0 += NH_VW) {
        int64_t i = 0;
        const nh_vec h = nh_ld(hu + l0);
        /* four components at once: independent accumulation chains, same order per lane */
        for (; i + 4 <= n; i += 4) {
            const int64_t o = i * nl + l0;
            nh_vec a0 = nh_splat(0.0), a1 = a0, a2 = a0, a3 = a0;
            for (int j = 0; j < s; ++j) {
                const double *kj = K[idx[j]] + o;
                a0 += a[j] * nh_ld(kj);
                a1 += a[j] * nh_ld(kj + nl);
                a2 += a[j] * nh_ld(kj + 2 * nl);
                a3 += a[j] * nh_ld(kj + 3 * nl);
            }
            nh_st(out + o, nh_ld(x + o) + h * a0);
            nh_st(out + o + nl, nh_ld(x + o + nl) + h * a1);
            nh_st(out + o + 2 * nl, nh_ld(x + o + 2 * nl) + h * a2);
            nh_st(out + o + 3 * nl, nh_ld(x + o + 3 * nl) + h * a3);
        }
        for (; i < n; ++i) {
            const int64_t o = i * nl + l0;
            nh_vec acc = nh_splat(0.0);
            for (int j = 0; j < s; ++j) acc += a[j] * nh_ld(K[idx[j]] + o);
            nh_st(out + o, nh_ld(x + o) + h * acc);
        }
    }
#else
    for (int64_t l0 = 0; l0 < nl; l0 += NH_CHUNK) {
        int64_t i = 0;
        for (; i < n; ++i) {
            const int64_t o = i * nl + l0;
            for (int c = 0; c < NH_CHUNK; ++c) {
                double acc = 0.0;
                for (int j = 0; j < s; ++j) acc += a[j] * K[idx[j]][o + c];
                out[o + c] = x[o + c] + hu[l0 + c] * acc;
            }
        }
    }
#endif
}

/* Nonzero entries of a dense coefficient row w[0..s-1]: values to a, positions to idx. */
static inline int nh_sparse_row(const double *w, int s, double *a, int *idx) {
    int c = 0;
    for (int j = 0; j < s; ++j)
        if (w[j] != 0.0) {
            a[c] = w[j];
            idx[c++] = j;
        }
    return c;
}

/* Chunk sums of the stage derivatives with weights w: acc_c = sum_s w[s] K[s][o + c]. */
NH_INLINE void nh_wsum(double *restrict acc, const double *w, int s, double *const *K, int64_t o) {
#if NH_HAVE_VEC
    for (int hlf = 0; hlf < NH_CHUNK; hlf += NH_VW) {
        nh_vec v = nh_splat(0.0);
        for (int j = 0; j < s; ++j) v += w[j] * nh_ld(K[j] + o + hlf);
        nh_st(acc + hlf, v);
    }
#else
    for (int c = 0; c < NH_CHUNK; ++c) {
        double v = 0.0;
        for (int j = 0; j < s; ++j) v += w[j] * K[j][o + c];
        acc[c] = v;
    }
#endif
}

/* Write the current state of slot l as output row k of its trajectory. */
static inline void nh_store(nh_block *b, int64_t l, int64_t k) {
    double *row = b->y + (b->gid[l] * b->nt + k) * b->n;
    for (int64_t i = 0; i < b->n; ++i) row[i] = b->x[i * b->nl + l];
}

/* Slot l is done with its trajectory: hand its counters over and free the slot. */
static inline void nh_retire(nh_block *b, int64_t l) {
    b->cnt[NH_STAT_RHS * b->nl + l] += b->ncalls - b->call0[l];
    for (int k = 0; k < NH_NSTATS; ++k) {
        b->stats[b->gid[l] * NH_NSTATS + k] = b->cnt[k * b->nl + l];
        b->cnt[k * b->nl + l] = 0;
    }
    if (b->t_end) b->t_end[b->gid[l]] = b->tl[l];
    if (b->x_end)
        for (int64_t i = 0; i < b->n; ++i) b->x_end[b->gid[l] * b->n + i] = b->x[i * b->nl + l];
    b->active[l] = 0;
    b->gid[l] = -1;
}

/* Slot l ends its trajectory before the last output time: its outputs from row kout on
 * become NaN, then it retires. */
static inline void nh_end_early(nh_block *b, int64_t l) {
    for (int64_t k = b->kout[l]; k < b->nt; ++k) {
        double *row = b->y + (b->gid[l] * b->nt + k) * b->n;
        for (int64_t i = 0; i < b->n; ++i) row[i] = NAN;
    }
    b->kout[l] = b->nt;
    nh_retire(b, l);
}

/* Stop slot l with a status code; its outputs from row kout on become NaN. */
static inline void nh_fail(nh_block *b, int64_t l, int32_t code) {
    b->status[b->gid[l]] = code;
    nh_end_early(b, l);
}

/* Atomic fetch-and-add / load on the shared trajectory counter, load / set of a stop flag. */
#if defined(_MSC_VER) && !defined(__clang__)
#include <intrin.h>
static inline int64_t nh_fetch_add(int64_t *p, int64_t v) { return _InterlockedExchangeAdd64((volatile __int64 *)p, v); }
static inline int64_t nh_load(int64_t *p) { return _InterlockedOr64((volatile __int64 *)p, 0); }
static inline int nh_load_flag(int *p) { return (int)_InterlockedOr((volatile long *)p, 0); }
static inline void nh_set_flag(int *p) { _InterlockedExchange((volatile long *)p, 1); }
#else
static inline int64_t nh_fetch_add(int64_t *p, int64_t v) { return __atomic_fetch_add(p, v, __ATOMIC_RELAXED); }
static inline int64_t nh_load(int64_t *p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
static inline int nh_load_flag(int *p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
static inline void nh_set_flag(int *p) { __atomic_store_n(p, 1, __ATOMIC_RELAXED); }
#endif

/* Whether a stop was asked for: runs the optional poll hook (the caller's signal check) first,
 * then reads the flag. Inline, since the schemes ask on every step. */
static inline int nh_check_stop(nh_interrupt *s) {
    if (!s) return 0;
    if (s->poll && s->poll(s->ctx)) nh_set_flag(&s->flag);
    return nh_load_flag(&s->flag);
}

/* Whether the run this block belongs to was asked to stop (see nh_interrupt). The flag,
 * which any thread may set, is read on every call; the poll hook runs on every
 * NH_POLL_EVERY-th only (a call out of a scheme's loop every step was a measurable share of
 * a small system's one-trajectory Taylor step; the hook reads the clock itself). */
#define NH_POLL_EVERY 8
static inline int nh_stopping(nh_block *b) {
    if (b->err != NH_OK) return 1;
    nh_interrupt *s = b->opt->stop;
    if (!s) return 0;
    if (--b->poll_tick < 0) {
        b->poll_tick = NH_POLL_EVERY - 1;
        if (s->poll && s->poll(s->ctx)) nh_set_flag(&s->flag);
    }
    return nh_load_flag(&s->flag);
}

/* The derived parameter rows of slots 0..nw-1 from their parameter rows (nh_abi.h); a
 * failure is kept in b->err and stops the run. */
static inline void nh_derive_block(nh_block *b) {
    const nh_system *s = b->sys;
    if (!s->derive || b->err != NH_OK) return;
    const int rc = s->derive(s->ctx, b->tl, b->x, b->par, b->par + s->npar * b->nl, b->nw, b->nl);
    if (rc != NH_OK) b->err = rc;
}

/* Largest element count of one work buffer: a count below it, times the few dozen arrays and
 * the 8 bytes of a double, stays far from overflowing size_t and ptrdiff_t. */
#define NH_MAX_ELEMS ((int64_t)1 << 50)

/* Whether a * b (both >= 0) stays at most NH_MAX_ELEMS. */
static inline int nh_fits(int64_t a, int64_t b) { return b == 0 || a <= NH_MAX_ELEMS / b; }

/* Whether trajectories still wait for a slot (of this block, or of any block when shared). */
static inline int nh_pending(const nh_block *b) {
    return b->shared ? nh_load(b->shared) < b->end : b->next < b->end;
}

/* The next waiting trajectory, or -1. With a shared counter, the blocks of all threads draw
 * from one queue, so each thread has a single tail (slots idling when the queue is empty)
 * instead of one per range of trajectories. */
static inline int64_t nh_take(nh_block *b) {
    if (b->shared) {
        const int64_t g = nh_fetch_add(b->shared, 1);
        return g < b->end ? g : -1;
    }
    return b->next < b->end ? b->next++ : -1;
}

/* Put waiting trajectories into idle slots; fresh[l] = 1 for the slots just loaded.
 * Returns how many were loaded. */
static inline int64_t nh_refill(nh_block *b, unsigned char *fresh) {
    int64_t c = 0;
    for (int64_t l = 0; l < b->nl; ++l) fresh[l] = 0;
    for (int64_t l = 0; l < b->nw; ++l) {
        if (b->gid[l] >= 0) continue;
        const int64_t g = nh_take(b);
        if (g < 0) break;
        b->gid[l] = g;
        for (int64_t i = 0; i < b->n; ++i) b->x[i * b->nl + l] = b->x0[g * b->n + i];
        for (int64_t k = 0; k < b->sys->npar; ++k)
            b->par[k * b->nl + l] = b->par_in[g * b->par_stride + k];
        b->tl[l] = b->t_eval[0];
        b->kout[l] = 1;
        b->status[g] = NH_LANE_OK;
        b->call0[l] = b->ncalls;
        nh_store(b, l, 0);
        b->active[l] = 1;
        fresh[l] = 1;
        ++c;
        if (b->nt < 2) nh_retire(b, l);
    }
    if (c > 0) nh_derive_block(b); /* once per trajectory (the other slots' rows stay equal) */
    return c;
}

/* Evaluate the vector field on the block, counting the evaluation for the slots in mask. */
static inline int nh_rhs_for(nh_block *b, const double *t, const double *x, double *out,
                             const unsigned char *mask) {
    int rc = b->sys->rhs(b->sys->ctx, t, x, b->par, out, b->nw, b->nl);
    int64_t *restrict c = nh_cnt(b, NH_STAT_RHS);
    for (int64_t l = 0; l < b->nl; ++l) c[l] += mask[l];
    return rc;
}

/* Whether every component of lane l of v (SoA, m components) is finite (see
 * nh_finite_lanes). */
static inline int nh_finite_lane(const double *v, int64_t m, int64_t nl, int64_t l) {
    double acc = 0.0;
    for (int64_t i = 0; i < m; ++i) acc += v[i * nl + l] - v[i * nl + l];
    return acc == 0.0;
}

/* fin[l] = 1 if every component of v (SoA, m components) is finite in lane l: x - x is 0 for
 * a finite x and NaN for an infinite or NaN one, so a lane's sum of them is 0 exactly when
 * all are finite. The sums of a chunk stay in registers (no byte store and reload per
 * component). */
static inline void nh_finite_lanes(const double *v, int64_t m, int64_t nl, unsigned char *fin) {
#if NH_HAVE_VEC
    for (int64_t l0 = 0; l0 < nl; l0 += NH_VW) {
        nh_vec acc = nh_splat(0.0);
        for (int64_t i = 0; i < m; ++i) {
            const nh_vec x = nh_ld(v + i * nl + l0);
            acc += x - x;
        }
        const nh_ivec ok = acc == nh_splat(0.0);
        for (int c = 0; c < NH_VW; ++c) fin[l0 + c] = (unsigned char)(ok[c] != 0);
    }
#else
    for (int64_t l = 0; l < nl; ++l) fin[l] = (unsigned char)nh_finite_lane(v, m, nl, l);
#endif
}

/*
 * nh_integrate_block with core extensions: dense = 1 (method NH_DOP853 only, else NH_ERR_ARG)
 * takes the outputs at t_eval[1..nt-2] from DOP853's continuous extension of degree 7 (three
 * more stages on the steps that pass an output time), so the step sequence does not depend on
 * the output times; only the step to the last output time is shortened to land on it.
 * dense = 0 is nh_integrate_block (bit-identical). ev: NULL, or events (needs dense = 1, or
 * method NH_TAYLOR, whose outputs always come from its series: dense 0 or 1 alike).
 */
int nh_integrate_block_ex(const nh_system *sys, const nh_options *opt, const double *t_eval,
                          int64_t nt, const double *x0, const double *par, int64_t par_stride,
                          int64_t lane0, int64_t count, int64_t width, double *y,
                          int32_t *status, int64_t *stats, double *t_end, int64_t *shared_next,
                          int dense, const nh_events *ev, double *x_end);

/*
 * One fixed step of size h from time t for every lane of the block: writes the increment
 * dx (SoA [n][nl]) and sets ok[l] = 0 for lanes whose stage equations did not converge.
 * `work` holds nh_fixed_work(method, n, nl) doubles and persists across steps (leapfrog:
 * the last kick's force; Gauss: the last stage derivatives, the next starting guess);
 * *fresh = 1 tells a scheme that it holds nothing yet.
 */
int64_t nh_fixed_work(int method, int64_t n, int64_t nl);
int nh_rk4_step(nh_block *b, double t, double h, double *work, double *dx);
int nh_leapfrog_step(nh_block *b, double t, double h, double *work, double *dx, int *fresh);
int nh_gauss_step(nh_block *b, int stages, double t, double h, double *work, double *dx,
                  unsigned char *ok, int *fresh);

/* ------------------------------------------------------ events (events.c, shared) ---- */

/* Dense evaluation of lane l of a block at theta in [0, 1] over its last accepted step (from
 * told to told + hu): the state to out[i * stride], i < n. ctx: the scheme's polynomial. */
typedef void (*nh_dense_fn)(const nh_block *b, const void *ctx, int64_t l, double th,
                            double *out, int64_t stride);

/* Scratch of the event search (see nh_events), allocated by nh_ev_alloc. */
typedef struct {
    double *g0, *g1, *gt, *root;                /* [nev][nl] */
    double *a, *bb, *fa, *fb, *th, *te, *tstop; /* [nl] */
    double *xe;                                 /* [n][nl] */
    unsigned char *srch, *cross, *stop;         /* [nl] */
    signed char *side;                          /* [nl] */
    double *dbuf;                               /* owner of the doubles */
    unsigned char *fbuf;                        /* owner of the flags */
} nh_ev_work;

/* Allocate (zeroed) the scratch of nev events on a block of nl slots, n states; ev NULL: an
 * empty work (every pointer NULL). Returns NH_OK or NH_ERR_NOMEM (nothing left allocated). */
int nh_ev_alloc(nh_ev_work *w, const nh_events *ev, int64_t n, int64_t nl);
void nh_ev_free(nh_ev_work *w);

/* The event functions at the states of the slots just refilled (fresh) into w->g0, the
 * values a crossing in their first step is measured from. Returns the kernel's code. */
static inline int nh_ev_fresh(nh_block *b, const nh_events *ev, const unsigned char *fresh,
                              nh_ev_work *w) {
    const int64_t nl = b->nl;
    const int rc = ev->fn(ev->ctx, b->tl, b->x, b->par, w->gt, b->nw, nl);
    if (rc != NH_OK) return rc;
    for (int64_t j = 0; j < ev->nev * nl; ++j)
        if (fresh[j % nl]) w->g0[j] = w->gt[j];
    return NH_OK;
}

/* An event function's value counts as below zero when it is negative or NaN: a condition
 * that turns NaN has failed (a domain's), and a function that turns NaN has crossed, at the
 * edge of its NaN stretch (which the search locates like a root). */
static inline int nh_ev_below(double g) { return g < 0.0 || g != g; }

/* Whether g crosses zero from g0 to g1 in direction d (+1 rising, -1 falling, 0 either). */
static inline int nh_ev_crossing(double g0, double g1, int32_t d) {
    const int up = nh_ev_below(g0) && g1 >= 0.0, down = g0 > 0.0 && (g1 <= 0.0 || g1 != g1);
    return d > 0 ? up : d < 0 ? down : (up || down);
}

/* Locate the events of the lanes in w->cross on the dense output (dense, dctx) of their
 * accepted steps (told, hu; new time b->tl, new state xn), in lockstep over lanes; record them
 * in time order up to and including each lane's first terminal one (w->stop, w->tstop). */
int nh_ev_locate(nh_block *b, const nh_events *ev, nh_dense_fn dense, const void *dctx,
                 const double *hu, const double *told, const double *xn, nh_ev_work *w);

#endif /* NH_BLOCK_H */
