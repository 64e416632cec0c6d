/* Adaptive Taylor-series method over a block of lanes (method NH_TAYLOR).
 *
 * Every step calls the system's Taylor kernel once for the block (nh_taylor_fn: normalised
 * coefficients x^[k], k <= p, of the solution through each lane's (t, x)), picks a step size
 * per lane from the last two coefficients (Jorba & Zou 2005, as heyoka) or takes the fixed
 * step opt->h, and sums the series by Horner's rule. Output times inside a step, and events,
 * come from the same polynomial, so steps are never shortened except the one landing on the
 * final output time. Every inner loop runs over lanes; a lane's arithmetic never involves
 * another lane, so results do not depend on the block width or the number of threads. */
#include "nh_block.h"

/* The order the method runs at (nh_core.h): `order` if positive, else from the tolerance
 * eps = min(rtol, atol) by heyoka's rule p = ceil(-ln(eps) / 2 + 1), clamped to [2,
 * NH_TAYLOR_MAX_ORDER]. */
int64_t nh_taylor_order(int64_t order, double rtol, double atol) {
    if (order > 0) return order;
    const double eps = NH_MIN(rtol, atol);
    double p = ceil(-0.5 * log(eps) + 1.0);
    if (!(p >= 2.0)) p = 2.0; /* also NaN */
    if (p > (double)NH_TAYLOR_MAX_ORDER) p = (double)NH_TAYLOR_MAX_ORDER;
    return (int64_t)p;
}

/* The order a run takes: o->order if positive, else o->order_auto if positive, else the
 * tolerance's p0. */
static int64_t run_order(const nh_options *o) {
    if (o->order <= 0 && o->order_auto > 0) return o->order_auto;
    return nh_taylor_order(o->order, o->rtol, o->atol);
}

/* Doubles per lane slot of the block-wide work of the Taylor method (the series and the new
 * states), for the block's width (nh_block_width). */
int64_t nh_taylor_work(const nh_options *o, int64_t n) {
    return (run_order(o) + 2) * n;
}

/* The series of a block: coef[(k * n + i) * cs + l], k <= p, cs = nl; hu: the step of each
 * lane. A block of one trajectory (lane 0) keeps its series packed, cs = 1. */
typedef struct {
    const double *coef;
    int64_t p, cs;
    const double *hu;
} tay_poly;

/* The series at dt by Horner's rule in u = dt^2 over its even and its odd orders, x = E(u) +
 * dt O(u): two chains of p/2 operations instead of one of p (one trajectory's step waits on
 * the longest; measured faster on Henon-Heiles, see benchmarks/NOTES.md). Every variant below
 * does, per component, these operations in this order (the same bits whichever computes it).
 * p >= 1: pe and po are the highest even and odd orders. */
#define NH_EVEN(p) ((p) & ~(int64_t)1)
#define NH_ODD(p) ((p) - 1 + ((p) & 1))

/* One chain of four components (stride nl, orders ks apart) from the order top down to low,
 * every other order: a[c] = x^[top], then a[c] = a[c] u + x^[k] for k = top - 2, top - 4, ...
 * >= low. */
static inline void horner_chain4(const double *c, int64_t ks, int64_t nl, int64_t top,
                                 int64_t low, double u, double a[4]) {
    for (int j = 0; j < 4; ++j) a[j] = c[top * ks + j * nl];
    for (int64_t k = top - 2; k >= low; k -= 2) {
        const double *ck = c + k * ks;
        a[0] = a[0] * u + ck[0];
        a[1] = a[1] * u + ck[nl];
        a[2] = a[2] * u + ck[2 * nl];
        a[3] = a[3] * u + ck[3 * nl];
    }
}

/* The series of lane l at dt: out[i * stride], i < n. Four components at a time, eight
 * independent chains in flight. */
static inline void horner_lane(const double *coef, int64_t p, int64_t n, int64_t nl, int64_t l,
                               double dt, double *out, int64_t stride) {
    const int64_t ks = n * nl, pe = NH_EVEN(p), po = NH_ODD(p);
    const double u = dt * dt;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const double *c = coef + i * nl + l;
        double e[4], o[4];
        horner_chain4(c, ks, nl, pe, 0, u, e);
        horner_chain4(c, ks, nl, po, 1, u, o);
        for (int j = 0; j < 4; ++j) out[(i + j) * stride] = e[j] + o[j] * dt;
    }
    for (; i < n; ++i) {
        const double *c = coef + i * nl + l;
        double e = c[pe * ks], o = c[po * ks];
        for (int64_t k = pe - 2; k >= 0; k -= 2) e = e * u + c[k * ks];
        for (int64_t k = po - 2; k >= 1; k -= 2) o = o * u + c[k * ks];
        out[i * stride] = e + o * dt;
    }
}

/* nh_dense_fn of the series: theta over the step (dt = theta * hu, exactly hu at theta 1). */
static void dense_cb(const nh_block *b, const void *ctx, int64_t l, double th, double *out,
                     int64_t stride) {
    const tay_poly *s = (const tay_poly *)ctx;
    horner_lane(s->coef, s->p, b->n, s->cs, l, th * s->hu[l], out, stride);
}

/* The series of one trajectory, packed (coef[k * n + i]), at dt: out[i * stride]. Per
 * component the operations of horner_lane, in its order; the components are contiguous, so
 * the compiler takes 32, 8 or 4 of them at a time in vector registers, several independent
 * chains in flight (horner_lane's scalar chains were measured slow for large systems), the
 * last few one by one. */
NH_INLINE void horner_one(const double *restrict coef, int64_t p, int64_t n, double dt,
                          double *restrict out, int64_t stride) {
    const int64_t pe = NH_EVEN(p), po = NH_ODD(p);
    const double u = dt * dt;
    int64_t i = 0;
#define NH_HORNER_ONE(W)                                                                          \
    for (; i + (W) <= n; i += (W)) {                                                              \
        double e[W], o[W];                                                                        \
        for (int c = 0; c < (W); ++c) e[c] = coef[pe * n + i + c], o[c] = coef[po * n + i + c];   \
        for (int64_t k = pe - 2; k >= 0; k -= 2)                                                  \
            for (int c = 0; c < (W); ++c) e[c] = e[c] * u + coef[k * n + i + c];                  \
        for (int64_t k = po - 2; k >= 1; k -= 2)                                                  \
            for (int c = 0; c < (W); ++c) o[c] = o[c] * u + coef[k * n + i + c];                  \
        for (int c = 0; c < (W); ++c) out[(i + c) * stride] = e[c] + o[c] * dt;                   \
    }
    NH_HORNER_ONE(32)
    NH_HORNER_ONE(8)
    NH_HORNER_ONE(4)
    NH_HORNER_ONE(1)
#undef NH_HORNER_ONE
}

#if NH_HAVE_VEC
/* horner_chain4 for a vector of lanes. */
NH_INLINE void horner_chain4v(const double *c, int64_t ks, int64_t nl, int64_t top, int64_t low,
                              nh_vec u, nh_vec a[4]) {
    for (int j = 0; j < 4; ++j) a[j] = nh_ld(c + top * ks + j * nl);
    for (int64_t k = top - 2; k >= low; k -= 2) {
        const double *ck = c + k * ks;
        a[0] = a[0] * u + nh_ld(ck);
        a[1] = a[1] * u + nh_ld(ck + nl);
        a[2] = a[2] * u + nh_ld(ck + 2 * nl);
        a[3] = a[3] * u + nh_ld(ck + 3 * nl);
    }
}
#endif

/* The series of every lane at dt[l]: out[i * nl + l] (per lane the operations of horner_lane,
 * in its order). Four components of one lane vector at a time, their sums in registers
 * through the orders: the coefficients are read once and out written once (no store and
 * reload per order), eight independent chains in flight. */
NH_INLINE void horner_block(const double *restrict coef, int64_t p, int64_t n, int64_t nl,
                            int64_t nv, const double *restrict dt, double *restrict out) {
    const int64_t ks = n * nl;
#if NH_HAVE_VEC
    const int64_t pe = NH_EVEN(p), po = NH_ODD(p);
    int64_t l0 = 0;
    for (; l0 + NH_VW <= nv; l0 += NH_VW) {
        const nh_vec d = nh_ld(dt + l0), u = d * d;
        int64_t i = 0;
        for (; i + 4 <= n; i += 4) {
            const double *c = coef + i * nl + l0;
            nh_vec e[4], o[4];
            horner_chain4v(c, ks, nl, pe, 0, u, e);
            horner_chain4v(c, ks, nl, po, 1, u, o);
            for (int j = 0; j < 4; ++j) nh_st(out + (i + j) * nl + l0, e[j] + o[j] * d);
        }
        for (; i < n; ++i) {
            const double *c = coef + i * nl + l0;
            nh_vec e = nh_ld(c + pe * ks), o = nh_ld(c + po * ks);
            for (int64_t k = pe - 2; k >= 0; k -= 2) e = e * u + nh_ld(c + k * ks);
            for (int64_t k = po - 2; k >= 1; k -= 2) o = o * u + nh_ld(c + k * ks);
            nh_st(out + i * nl + l0, e + o * d);
        }
    }
    /* the rest of the lanes in use one by one (a vector load right after the kernel's
     * stores of single lanes would wait on store forwarding) */
    for (; l0 < nv; ++l0) horner_lane(coef, p, n, nl, l0, dt[l0], out + l0, nl);
#else
    for (int64_t l = 0; l < nv; ++l) horner_lane(coef, p, n, nl, l, dt[l], out + l, nl);
#endif
    /* lanes nv..nl-1 (padding): the last coefficients, as zero as they are */
    for (int64_t i = 0; i < n && nv < nl; ++i)
        memcpy(out + i * nl + nv, coef + p * ks + i * nl + nv, sizeof(double) * (size_t)(nl - nv));
}

/* Infinity norm over the n components of v (SoA, stride nl) for lanes l < nv; NaN stays NaN.
 * On the bits of |x| as unsigned integers the order of magnitudes is the numeric one, and
 * every NaN lies above infinity, so an integer maximum is the norm, NaN included, without a
 * branch. Each vector of lanes keeps its maxima in registers through the components and
 * stores them once (a store per component and a reload by the next one stalled on store
 * forwarding: a large share of the driver's time for one trajectory). */
NH_INLINE void norm_inf(const double *restrict v, int64_t n, int64_t nl, int64_t nv,
                        double *restrict out) {
    const uint64_t magnitude = 0x7fffffffffffffffULL;
    int64_t l0 = 0;
#if NH_HAVE_VEC
    /* four maxima over the components in flight (a maximum is exact and in any order the
     * same), combined at the end */
    const nh_ivec mag = nh_isplat((long long)magnitude);
    for (; l0 + NH_VW <= nv; l0 += NH_VW) {
        nh_ivec mx[4] = {nh_isplat(0), nh_isplat(0), nh_isplat(0), nh_isplat(0)};
        int64_t i = 0;
        for (; i + 4 <= n; i += 4)
            for (int c = 0; c < 4; ++c) {
                const nh_ivec a = (nh_ivec)nh_ld(v + (i + c) * nl + l0) & mag;
                const nh_ivec take = a > mx[c]; /* both below 2^63: the signed order is the same */
                mx[c] = (a & take) | (mx[c] & ~take);
            }
        for (; i < n; ++i) {
            const nh_ivec a = (nh_ivec)nh_ld(v + i * nl + l0) & mag;
            const nh_ivec take = a > mx[0];
            mx[0] = (a & take) | (mx[0] & ~take);
        }
        for (int c = 1; c < 4; ++c) {
            const nh_ivec take = mx[c] > mx[0];
            mx[0] = (mx[c] & take) | (mx[0] & ~take);
        }
        nh_st(out + l0, (nh_vec)mx[0]);
    }
#endif
    for (; l0 < nv; ++l0) {
        uint64_t mx = 0;
        for (int64_t i = 0; i < n; ++i) {
            uint64_t a;
            memcpy(&a, v + i * nl + l0, sizeof a);
            a &= magnitude;
            mx = a > mx ? a : mx;
        }
        memcpy(out + l0, &mx, sizeof mx);
    }
}

/* norm_inf of one lane's n contiguous components (a packed series, see tay_poly): the same
 * integer maximum, eight components at a time (vectorised by the compiler; a maximum is
 * exact, so the grouping does not change it). */
NH_INLINE double norm_one(const double *restrict v, int64_t n) {
    const int64_t magnitude = 0x7fffffffffffffffLL; /* |x| as integers below 2^63: signed */
    int64_t mx[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int c = 0; c < 8; ++c) {
            int64_t a;
            memcpy(&a, v + i + c, sizeof a);
            a &= magnitude;
            mx[c] = a > mx[c] ? a : mx[c];
        }
    for (int c = 0; i < n; ++i, ++c) {
        int64_t a;
        memcpy(&a, v + i, sizeof a);
        a &= magnitude;
        mx[c] = a > mx[c] ? a : mx[c];
    }
    for (int c = 1; c < 8; ++c) mx[0] = mx[c] > mx[0] ? mx[c] : mx[0];
    double out;
    memcpy(&out, mx, sizeof out);
    return out;
}

#if NH_HAVE_VEC
/* NH_VW doubles read one by one into a vector. */
NH_INLINE nh_vec nh_ld_each(const double *p) {
    nh_vec v;
    for (int c = 0; c < NH_VW; ++c) v[c] = p[c];
    return v;
}

/* NH_VW flags (bytes) as a mask: -1 where set */
NH_INLINE nh_ivec nh_flags(const unsigned char *f) {
    nh_ivec m;
    for (int c = 0; c < NH_VW; ++c) m[c] = -(long long)(f[c] != 0);
    return m;
}

/* a where m is set (-1), else b */
NH_INLINE nh_vec nh_sel(nh_ivec m, nh_vec a, nh_vec b) {
    return (nh_vec)(((nh_ivec)a & m) | ((nh_ivec)b & ~m));
}

/* Natural logarithm of NH_VW positive finite values, absolute error below 1e-7 (a step size
 * h = exp(a) needs no more: its relative error stays below 1e-8): x = m 2^e with m in
 * [sqrt(1/2), sqrt(2)), log x = e log 2 + t P(t), t = m - 1, P of degree 7 interpolating
 * log(1 + t) / t at Chebyshev points of that interval (6e-8). No division: the step sizes of
 * a block wait on it (libm's log and exp per lane and step, then a series of atanh with its
 * division, were measured a sizeable share of a Henon-Heiles batch).
 * Zero and subnormals give about -709 (enough: they only make a step long). */
NH_INLINE nh_vec nh_vlog(nh_vec x) {
    const nh_ivec u = (nh_ivec)x;
    const nh_ivec frac = u & nh_isplat(0x000fffffffffffffLL);
    nh_ivec eb = (u >> 52) & nh_isplat(0x7ff);
    nh_vec m = (nh_vec)(frac | nh_isplat(0x3ff0000000000000LL)); /* [1, 2) */
    const nh_ivec big = m > nh_splat(1.4142135623730951);        /* -1 where true */
    m = nh_sel(big, m * nh_splat(0.5), m);
    eb = eb - big;
    /* the exponent as a double: 2^52 + eb has eb in its low bits */
    const nh_vec e =
        (nh_vec)(eb | nh_isplat(0x4330000000000000LL)) - nh_splat(4503599627370496.0 + 1023.0);
    const nh_vec t = m - nh_splat(1.0), t2 = t * t, t4 = t2 * t2;
    /* P by Estrin's scheme (a short chain: one lane's step waits on it) */
    const nh_vec q01 = nh_splat(0.9999999425426722) + nh_splat(-0.5000036309272986) * t;
    const nh_vec q23 = nh_splat(0.33335114140346267) + nh_splat(-0.24970071685053416) * t;
    const nh_vec q45 = nh_splat(0.1989856504825392) + nh_splat(-0.17247013303905104) * t;
    const nh_vec q67 = nh_splat(0.16234189799048054) + nh_splat(-0.10134056750721351) * t;
    const nh_vec q = (q01 + q23 * t2) + (q45 + q67 * t2) * t4;
    return e * nh_splat(0.6931471805599453) + t * q;
}

/* exp of NH_VW values, relative error about 2e-10, for step sizes: below about -708 it gives
 * 2^-1022, above about 708 2^1022 (a step then fails as too short, or lands on the final
 * time). y = (k + f) ln 2 with k an integer and |f| <= 1/2: exp(f ln 2) by its Taylor
 * polynomial to degree 8, 2^k from its exponent bits. NaN gives 2^-1022 (its lanes fail
 * before their step is used). */
NH_INLINE nh_vec nh_vexp(nh_vec y) {
    nh_vec t = y * nh_splat(1.4426950408889634);
    const nh_ivec hi = t > nh_splat(1022.0), lo = ~(t >= nh_splat(-1022.0)); /* NaN: low */
    t = nh_sel(hi, nh_splat(1022.0), nh_sel(lo, nh_splat(-1022.0), t));
    const nh_vec magic = nh_splat(6755399441055744.0); /* 1.5 2^52: rounds to an integer */
    const nh_vec big = t + magic;
    const nh_vec kf = big - magic;
    const nh_ivec k = (nh_ivec)big - (nh_ivec)magic;
    const nh_vec r = (t - kf) * nh_splat(0.6931471805599453); /* |r| <= 0.347 */
    /* sum_{j <= 8} r^j / j! by Estrin's scheme */
    const nh_vec r2 = r * r, r4 = r2 * r2, r8 = r4 * r4;
    const nh_vec p01 = nh_splat(1.0) + r, p23 = nh_splat(0.5) + nh_splat(1.0 / 6.0) * r;
    const nh_vec p45 = nh_splat(1.0 / 24.0) + nh_splat(1.0 / 120.0) * r;
    const nh_vec p67 = nh_splat(1.0 / 720.0) + nh_splat(1.0 / 5040.0) * r;
    const nh_vec q = (p01 + p23 * r2) + (p45 + p67 * r2) * r4 + nh_splat(1.0 / 40320.0) * r8;
    return q * (nh_vec)((k + nh_isplat(1023)) << 52);
}
#endif

/* The vector passes of a step (nh_run_taylor) over the whole vectors of lanes in use. Each
 * settles the lanes of the usual case with the operations of the lane-by-lane code it stands
 * for, in the same order (a lane's results do not depend on which code ran it), and sets
 * todo[l] for the lanes that code must take, and for the lanes after the last whole vector
 * (a small batch's lanes are written one by one: a vector load of them would wait on store
 * forwarding, and one lane costs less in the lane-by-lane code). Without vector types every
 * lane is left to it. */

/* Steps (the rule in nh_run_taylor): hu and hit of the active lanes whose norms are finite,
 * whose last coefficients are not all zero and whose step neither reaches the final time
 * nor is too short; hu = 0, hit = 0 for idle lanes. */
NH_INLINE void vec_steps(const nh_block *b, int fixed, int64_t p, double hfix, double hmax,
                         double dir, double tfin, const double *n0, const double *n1,
                         const double *n2, const double *hjz, double *hu, unsigned char *hit,
                         unsigned char *todo) {
    const int64_t nv = b->nw;
#if NH_HAVE_VEC
    const nh_vec zero = nh_splat(0.0);
    const nh_ivec mag = nh_isplat(0x7fffffffffffffffLL);
    int64_t l0 = 0;
    for (; l0 + NH_VW <= nv; l0 += NH_VW) {
        const nh_ivec act = nh_flags(b->active + l0);
        nh_ivec odd = nh_isplat(0);
        nh_vec h = nh_splat(hfix);
        if (!fixed) {
            /* orders a short series lacks count as zero (finite, and vanishing) */
            const nh_vec d2 = nh_ld(n2 + l0);
            const nh_vec d1 = p > 1 ? nh_ld(n1 + l0) : zero;
            const nh_vec d0 = p > 2 ? nh_ld(n0 + l0) : zero;
            const nh_ivec finite = (d2 - d2 == zero) & (d1 - d1 == zero) & (d0 - d0 == zero);
            odd = ~finite | ((d2 == zero) & (d1 == zero) & (d0 == zero));
            h = nh_ld(hjz + l0);
        }
        h = nh_sel(h < nh_splat(hmax), h, nh_splat(hmax));
        const nh_vec tl = nh_ld(b->tl + l0);
        const nh_vec rest = nh_splat(tfin) - tl;
        const nh_ivec reach = h >= (nh_vec)((nh_ivec)rest & mag) * nh_splat(1.0 - 1e-12);
        const nh_vec atl = (nh_vec)((nh_ivec)tl & mag);
        const nh_vec floor_t = nh_sel(atl > nh_splat(1e-300), atl, nh_splat(1e-300));
        const nh_ivec tiny = (h <= nh_splat(10.0 * 2.220446049250313e-16) * floor_t) |
                             (h < nh_splat(1e-300));
        odd = act & (odd | (tiny & ~reach));
        const nh_ivec take = act & ~odd;
        nh_st(hu + l0, nh_sel(take, nh_sel(reach, rest, nh_splat(dir) * h), zero));
        const nh_ivec lands = take & reach;
        for (int c = 0; c < NH_VW; ++c) {
            hit[l0 + c] = (unsigned char)(lands[c] != 0);
            todo[l0 + c] = (unsigned char)(odd[c] != 0);
        }
    }
#else
    const int64_t l0 = 0;
    (void)fixed, (void)p, (void)hfix, (void)hmax, (void)dir, (void)tfin, (void)n0, (void)n1;
    (void)n2, (void)hjz, (void)hu, (void)hit;
#endif
    memset(todo + l0, 1, (size_t)(nv - l0));
}

/* The new times (told: the old ones) and step counts of the active lanes whose new state xn
 * is finite; todo: the active lanes whose state is not. */
NH_INLINE void vec_advance(nh_block *b, const double *xn, const double *hu,
                           const unsigned char *hit, double tfin, double *told,
                           unsigned char *todo) {
    const int64_t nv = b->nw, n = b->n, nl = b->nl;
#if NH_HAVE_VEC
    int64_t *steps = nh_cnt(b, NH_STAT_STEPS);
    int64_t l0 = 0;
    for (; l0 + NH_VW <= nv; l0 += NH_VW) {
        nh_vec acc = nh_splat(0.0);
        for (int64_t i = 0; i < n; ++i) {
            const nh_vec v = nh_ld(xn + i * nl + l0);
            acc += v - v;
        }
        const nh_ivec act = nh_flags(b->active + l0);
        const nh_ivec ok = act & (acc == nh_splat(0.0));
        const nh_vec tl = nh_ld(b->tl + l0);
        nh_st(told + l0, tl);
        const nh_vec tn = nh_sel(nh_flags(hit + l0), nh_splat(tfin), tl + nh_ld(hu + l0));
        nh_st(b->tl + l0, nh_sel(ok, tn, tl));
        nh_ivec s;
        memcpy(&s, steps + l0, sizeof s);
        s -= ok; /* + 1 where ok (-1) */
        memcpy(steps + l0, &s, sizeof s);
        const nh_ivec bad = act & ~ok;
        for (int c = 0; c < NH_VW; ++c) todo[l0 + c] = (unsigned char)(bad[c] != 0);
    }
#else
    const int64_t l0 = 0;
    (void)n, (void)nl, (void)xn, (void)hu, (void)hit, (void)tfin, (void)told;
#endif
    memset(todo + l0, 1, (size_t)(nv - l0));
}

/* todo: the lanes with something to do after a step (nh_run_taylor): idle, an output time
 * passed, landed on the final time, at the step limit, or with events (every lane). */
NH_INLINE void vec_quiet(nh_block *b, const unsigned char *hit, int events, double dir,
                         int64_t max_steps, unsigned char *todo) {
    const int64_t nv = b->nw;
    int64_t l0 = 0;
#if NH_HAVE_VEC
    if (!events) {
        const int64_t *steps = nh_cnt(b, NH_STAT_STEPS);
        for (; l0 + NH_VW <= nv; l0 += NH_VW) {
            nh_vec tk;
            for (int c = 0; c < NH_VW; ++c) /* idle lanes may have passed the last */
                tk[c] = b->t_eval[NH_MIN(b->kout[l0 + c], b->nt - 1)];
            nh_ivec s;
            memcpy(&s, steps + l0, sizeof s);
            const nh_vec tl = nh_ld(b->tl + l0);
            const nh_ivec busy = ~nh_flags(b->active + l0) | nh_flags(hit + l0) |
                                 (nh_splat(dir) * (tl - tk) > nh_splat(0.0)) |
                                 (s >= nh_isplat((long long)max_steps));
            for (int c = 0; c < NH_VW; ++c) todo[l0 + c] = (unsigned char)(busy[c] != 0);
        }
    }
#else
    (void)hit, (void)events, (void)dir, (void)max_steps;
#endif
    memset(todo + l0, 1, (size_t)(nv - l0));
}

/* e s of Jorba & Zou's rule for a lane whose state has the norm nx (see jz_steps). */
static inline double jz_scale(double nx, double rtol, double atol, int tol_in_radius) {
    const int absolute = rtol * nx <= atol;
    const double s = absolute ? 1.0 : nx;
    const double e = tol_in_radius ? (absolute ? atol : rtol) : 1.0;
    return e * s;
}

/* Step sizes of Jorba & Zou for the lanes [0, nr) (nr: nv, the lanes in use, rounded up to
 * a multiple of NH_VW; at most nl):
 * h = fac min(r0, r1, r2), r_k = (e s / |x^[k]|)^(1/k) with the norms nx (state), n0 (order
 * p - 2; unused if !has0), n1 (order p - 1; unused if !has1) and n2 (order p), s = nx
 * (relative) or 1 (absolute: rtol nx <= atol), e = 1 with the order from the tolerance (the
 * radius of convergence), else the tolerance, computed as exp of the smallest logarithm.
 * Jorba & Zou take the last two orders, against series of odd or even functions; the third
 * guards series that vanish, or nearly, at two orders in a row: x'' = -x^3 from (1e-12, 1)
 * (coefficients of x' near zero at orders 2, 3 mod 4), y' = 1 - y^3 from 1e-8 (nonzero at 1
 * mod 3 only, nearly) took steps from the tiny last two that gave errors of 1e-3 and 6e-8 at
 * tol 1e-12. Lanes whose norms are not finite get a meaningless h: the caller fails them
 * first. Every lane has the same operations in the same order whichever vector it is in, so
 * a lane's steps do not depend on the batch. */
NH_INLINE void jz_steps(const double *restrict nx, const double *restrict n0,
                        const double *restrict n1, const double *restrict n2, int64_t nv,
                        int64_t nr, double rtol, double atol, int tol_in_radius, double ip,
                        double ip1, double ip0, int has1, int has0, double fac,
                        double *restrict h) {
#if NH_HAVE_VEC
    if (nv == 1) {
        /* one lane: its four logarithms in one vector (nh_vlog works element by element, so
         * each has the bits it has in a vector of lanes; the same operations follow) */
        const double es = jz_scale(nx[0], rtol, atol, tol_in_radius);
        const nh_vec lg = nh_vlog((nh_vec){es, n2[0], has1 ? n1[0] : 1.0, has0 ? n0[0] : 1.0});
        double a = (lg[0] - lg[1]) * ip;
        if (has1) {
            const double a1 = (lg[0] - lg[2]) * ip1;
            a = a1 < a ? a1 : a;
        }
        if (has0) {
            const double a0 = (lg[0] - lg[3]) * ip0;
            a = a0 < a ? a0 : a;
        }
        h[0] = nh_vexp(nh_splat(a))[0] * fac;
        return;
    }
    for (int64_t l0 = 0; l0 < nr; l0 += NH_VW) {
        /* a vector of lanes that norm_inf wrote one by one is gathered element-wise (a
         * vector load of single stores just made waits on store forwarding) */
        const int whole = l0 + NH_VW <= nv;
        const nh_vec x = whole ? nh_ld(nx + l0) : nh_ld_each(nx + l0);
        const nh_vec d2 = whole ? nh_ld(n2 + l0) : nh_ld_each(n2 + l0);
        const nh_ivec absolute = nh_splat(rtol) * x <= nh_splat(atol);
        const nh_vec s = (nh_vec)(((nh_ivec)nh_splat(1.0) & absolute) | ((nh_ivec)x & ~absolute));
        const nh_vec e = tol_in_radius ? (nh_vec)(((nh_ivec)nh_splat(atol) & absolute) |
                                                  ((nh_ivec)nh_splat(rtol) & ~absolute))
                                       : nh_splat(1.0);
        /* independent logarithms (no division before them): one lane's step waits on the
         * longest chain only */
        const nh_vec les = nh_vlog(e * s);
        const nh_vec a2 = (les - nh_vlog(d2)) * nh_splat(ip);
        nh_vec a = a2;
        if (has1) {
            const nh_vec d1 = whole ? nh_ld(n1 + l0) : nh_ld_each(n1 + l0);
            const nh_vec a1 = (les - nh_vlog(d1)) * nh_splat(ip1);
            const nh_ivec first = a1 < a;
            a = (nh_vec)(((nh_ivec)a1 & first) | ((nh_ivec)a & ~first));
        }
        if (has0) {
            const nh_vec d0 = whole ? nh_ld(n0 + l0) : nh_ld_each(n0 + l0);
            const nh_vec a0 = (les - nh_vlog(d0)) * nh_splat(ip0);
            const nh_ivec first = a0 < a;
            a = (nh_vec)(((nh_ivec)a0 & first) | ((nh_ivec)a & ~first));
        }
        nh_st(h + l0, nh_vexp(a) * nh_splat(fac));
    }
#else
    for (int64_t l = 0; l < nr; ++l) {
        const double es = jz_scale(nx[l], rtol, atol, tol_in_radius);
        const double a2 = log(es / n2[l]) * ip;
        const double a1 = has1 ? log(es / n1[l]) * ip1 : INFINITY;
        const double a0 = has0 ? log(es / n0[l]) * ip0 : INFINITY;
        h[l] = exp(NH_MIN(NH_MIN(a1, a2), a0)) * fac;
    }
#endif
}

/* The step of lane l when its last three coefficients are zero (0 < p): Jorba & Zou's rule,
 * as in jz_steps, from the highest order k >= max(1, p/2) whose coefficient is not zero;
 * infinite when all of orders p/2..p vanish (the series then ends there: a polynomial). A
 * series can vanish at several orders in a row without ending: y' = 1 - y^4 from 0 has
 * coefficients at orders 1 mod 4 only; with the rule of the last orders alone that was one
 * infinite step to the end. Scalar libm code for the lane alone: its steps still do not
 * depend on the batch. */
static double sparse_step(const double *coef, int64_t p, int64_t n, int64_t cs, int64_t l,
                          double nx, double rtol, double atol, int tol_in_radius, double fac) {
    const int64_t m = n * cs, kmin = NH_MAX((int64_t)1, (p + 1) / 2);
    for (int64_t k = p - 3; k >= kmin; --k) {
        double nk = 0.0;
        for (int64_t i = 0; i < n; ++i) nk = NH_MAX(nk, fabs(coef[k * m + i * cs + l]));
        if (nk == 0.0) continue;
        return exp((log(jz_scale(nx, rtol, atol, tol_in_radius)) - log(nk)) / (double)k) * fac;
    }
    return INFINITY;
}

NH_CLONES int nh_run_taylor(nh_block *b) {
    const nh_options *o = b->opt;
    const int64_t n = b->n, nl = b->nl, m = n * nl;
    const int fixed = o->h > 0.0;
    const int64_t p = run_order(o), p0 = nh_taylor_order(o->order, o->rtol, o->atol);
    if (p < 1 || p > NH_TAYLOR_MAX_ORDER) return NH_ERR_ARG;
    if (!nh_fits((p + 1) * n, nl)) return NH_ERR_SIZE;
    const double tfin = b->t_eval[b->nt - 1]; /* the final output time */
    const double dir = tfin >= b->t_eval[0] ? 1.0 : -1.0;
    const double hmax = o->hmax > 0.0 ? o->hmax : INFINITY;
    const double rtol = o->rtol, atol = o->atol;
    /* Jorba & Zou's safety factors: exp(-2) exp(-0.7 / (p - 1)) with the order p0 from the
     * tolerance (the radius of convergence then sets the step: (h / rho)^p0 = exp(-2 p0),
     * about eps), exp(-0.7 / (p - 1)) with a fixed order (the error estimate eps^(1/k) is in
     * the radius). At another order p than the tolerance's (order_auto) the radius shrinks
     * by exp(-2 pe / p) instead, pe = p0 + 1 for p > p0 (else p0): (h / rho)^p = exp(-2 pe),
     * the truncation error of the rule at p0 + 1 (one order to spare: the radius a longer
     * series estimates is larger; measured on four systems, the final error then stays at
     * most about that of the rule at p0), with longer steps. */
    const double pe = (double)(p > p0 ? p0 + 1 : p0);
    const double fac = o->order > 0 ? (p > 1 ? exp(-0.7 / (double)(p - 1)) : 1.0)
                                    : exp(-2.0 * pe / (double)p) * exp(-0.7 / (double)(p - 1));
    const double ip = 1.0 / (double)p, ip1 = p > 1 ? 1.0 / (double)(p - 1) : 0.0;
    const double ip0 = p > 2 ? 1.0 / (double)(p - 2) : 0.0;
    const nh_events *ev = b->ev;
    const int64_t nev = ev ? ev->nev : 0;

    /* A block of one trajectory (nw = 1, in a block of NH_CHUNK slots) of 16 states or more
     * packs its state and parameters for the kernel and gets its series packed (cs = 1:
     * coef[k * n + i]): the kernel's stores, the norms and Horner's rule then read and write
     * contiguous components, not one double in each stride of nl (a series of (p + 1) n
     * cache lines, 123 KB for Veselova n = 64 at order 14). Packing measured faster per step
     * from 16 states on; below, the strided series fits the L1 cache and packing costs more
     * than it saves (see benchmarks/NOTES.md). The same operations: the same bits. */
    const int one = b->nw == 1 && n >= 16;
    const int64_t cs = one ? 1 : nl; /* the stride of coef's components */
    const int64_t npar_all = b->sys->npar + b->sys->nderived;
    /* coef [(p+1) n][cs], xn [n][nl], then per-lane arrays (7 nl), then (one trajectory) its
     * packed state and parameters; zero: padding stays finite. (A packed series is 1/nl of
     * a block's, so calloc zeroes that much less per call.) */
    const int64_t mc = n * cs; /* the stride of coef's orders */
    /* coef at a 64-byte boundary: a block's rows (cs a multiple of NH_CHUNK lanes) are then
     * whole cache lines, which the kernel's vectors of 8 lanes store whole; calloc's 16-byte
     * alignment split every store in two lines (measured slower; see benchmarks/NOTES.md) */
    double *mem = (double *)calloc(
        (size_t)((p + 1) * mc + m + 7 * nl + (one ? n + npar_all : 0) + 8), sizeof(double));
    double *buf = mem ? (double *)(((uintptr_t)mem + 63) & ~(uintptr_t)63) : NULL;
    unsigned char *flags = (unsigned char *)calloc((size_t)(4 * nl), 1);
    nh_ev_work w;
    if (!buf || !flags || nh_ev_alloc(&w, ev, n, nl) != NH_OK) {
        free(mem);
        free(flags);
        return NH_ERR_NOMEM;
    }
    /* xn: the new states of a step; it and the block's state trade buffers every step */
    double *coef = buf, *xn = buf + (p + 1) * mc, *const x_home = b->x;
    double *hu = xn + m, *told = hu + nl, *nx = told + nl, *n1 = nx + nl, *n2 = n1 + nl;
    double *hjz = n2 + nl, *n0 = hjz + nl, *x1 = n0 + nl, *par1 = x1 + n;
    unsigned char *hit = flags, *fin = flags + nl, *fresh = flags + 2 * nl, *todo = flags + 3 * nl;
    const tay_poly poly = {coef, p, cs, hu};
    const int64_t pad = nl - b->nw; /* padding slots, always idle */
    /* lanes the block-wide loops cover: the slots in use (a small batch in a block of
     * NH_CHUNK slots does not pay for the padding; vectors of lanes, then one by one) */
    const int64_t nv = b->nw;
    /* the step sizes run in whole vectors (within nl): lanes beyond nv get unused values */
    const int64_t nr = NH_HAVE_VEC ? (nv + NH_VW - 1) / NH_VW * NH_VW : nv;
    for (int64_t l = nv; l < nr; ++l) nx[l] = n0[l] = n1[l] = n2[l] = 1.0; /* benign padding */
    int64_t idle = nl;
    int rc = NH_OK;

    for (;;) {
        if (nh_stopping(b)) { /* the driver marks the unfinished trajectories */
            rc = NH_ERR_INTERRUPTED;
            break;
        }
        /* Idle slots take waiting trajectories (a refill costs no kernel call). */
        if (idle > pad && nh_pending(b) && nh_refill(b, fresh) > 0) {
            if (ev) { /* g at the initial states */
                rc = nh_ev_fresh(b, ev, fresh, &w);
                if (rc != NH_OK) break;
            }
            nh_finite_lanes(b->x, n, nl, fin);
            for (int64_t l = 0; l < nl; ++l)
                if (fresh[l] && b->active[l] && !fin[l]) nh_fail(b, l, NH_LANE_NONFINITE);
            /* one trajectory: its parameters packed once per trajectory */
            for (int64_t r = 0; one && r < npar_all; ++r) par1[r] = b->par[r * nl];
        }
        if (nh_count_active(b) == 0) {
            if (nh_pending(b)) {
                idle = nl;
                continue;
            }
            break;
        }
        /* The series of every slot in use (one kernel call: one evaluation per lane). */
        b->ncalls += 1;
        if (one) {
            for (int64_t i = 0; i < n; ++i) x1[i] = b->x[i * nl];
            rc = b->sys->taylor(b->sys->ctx, b->tl, x1, par1, coef, p, 1, 1);
        } else {
            rc = b->sys->taylor(b->sys->ctx, b->tl, b->x, b->par, coef, p, b->nw, nl);
        }
        if (rc != NH_OK) break;
        /* Step sizes. */
        if (!fixed) {
            if (one) {
                nx[0] = norm_one(x1, n);
                n2[0] = norm_one(coef + p * n, n);
                if (p > 1) n1[0] = norm_one(coef + (p - 1) * n, n);
                if (p > 2) n0[0] = norm_one(coef + (p - 2) * n, n);
            } else {
                norm_inf(b->x, n, nl, nv, nx);
                norm_inf(coef + p * m, n, nl, nv, n2);
                if (p > 1) norm_inf(coef + (p - 1) * m, n, nl, nv, n1);
                if (p > 2) norm_inf(coef + (p - 2) * m, n, nl, nv, n0);
            }
            jz_steps(nx, n0, n1, n2, nv, nr, rtol, atol, o->order > 0, ip, ip1, ip0, p > 1,
                     p > 2, fac, hjz);
        }
        /* Each lane's step: the vector pass settles the usual lanes (active, finite norms, a
         * series that does not vanish at its last orders, a step neither landing on the
         * final time nor too short), with the operations of the lane-by-lane rule below;
         * the rule takes the others (todo). */
        vec_steps(b, fixed, p, o->h, hmax, dir, tfin, n0, n1, n2, hjz, hu, hit, todo);
        for (int64_t l = 0; l < nv; ++l) {
            if (!todo[l]) continue;
            hit[l] = 0;
            hu[l] = 0.0;
            if (!b->active[l]) continue;
            double h = o->h;
            if (!fixed) {
                if (!isfinite(n2[l]) || (p > 1 && !isfinite(n1[l])) ||
                    (p > 2 && !isfinite(n0[l]))) {
                    nh_fail(b, l, NH_LANE_NONFINITE);
                    continue;
                }
                h = hjz[l];
                if (n2[l] == 0.0 && (p == 1 || n1[l] == 0.0) && (p <= 2 || n0[l] == 0.0))
                    h = sparse_step(coef, p, n, cs, l, nx[l], rtol, atol, o->order > 0, fac);
            }
            h = NH_MIN(h, hmax);
            const double rest = tfin - b->tl[l];
            if (h >= fabs(rest) * (1.0 - 1e-12)) {
                hu[l] = rest;
                hit[l] = 1;
            } else if (h <= 10.0 * 2.220446049250313e-16 * NH_MAX(fabs(b->tl[l]), 1e-300) ||
                       h < 1e-300) {
                nh_fail(b, l, NH_LANE_STEP_UNDERFLOW);
            } else {
                hu[l] = dir * h;
            }
        }
        if (one)
            horner_one(coef, p, n, hu[0], xn, nl);
        else
            horner_block(coef, p, n, nl, nv, hu, xn);
        /* The new times: lanes whose new state is not finite fail (todo). */
        int64_t *steps = nh_cnt(b, NH_STAT_STEPS);
        vec_advance(b, xn, hu, hit, tfin, told, todo);
        for (int64_t l = 0; l < nv; ++l) {
            if (!todo[l]) continue;
            told[l] = b->tl[l];
            if (!b->active[l]) continue;
            if (!nh_finite_lane(xn, n, nl, l)) {
                nh_fail(b, l, NH_LANE_NONFINITE);
                continue;
            }
            b->tl[l] = hit[l] ? tfin : b->tl[l] + hu[l];
            steps[l] += 1;
        }
        /* Events on the series of the steps just taken. */
        if (ev) {
            int64_t anyev = 0;
            rc = ev->fn(ev->ctx, b->tl, xn, b->par, w.g1, b->nw, nl);
            if (rc != NH_OK) break;
            for (int64_t l = 0; l < nv; ++l) {
                unsigned char cr = 0;
                for (int64_t j = 0; j < nev && b->active[l] && !cr; ++j)
                    cr = (unsigned char)nh_ev_crossing(w.g0[j * nl + l], w.g1[j * nl + l],
                                                       ev->direction[j]);
                w.cross[l] = cr;
                w.stop[l] = 0;
                anyev += cr;
            }
            if (anyev) {
                rc = nh_ev_locate(b, ev, dense_cb, &poly, hu, told, xn, &w);
                if (rc != NH_OK) break;
            }
            for (int64_t j = 0; j < nev * nl; ++j)
                if (b->active[j % nl]) w.g0[j] = w.g1[j];
        }
        /* The new states of the lanes still active: xn becomes the block's state, the
         * lanes no longer active keeping their last one (no copy in the usual case, every
         * slot in use active), then the outputs inside the steps from the series. */
        int64_t nact = 0;
        for (int64_t l = 0; l < nv; ++l) nact += b->active[l];
        if (nact < nv)
            for (int64_t i = 0; i < n; ++i) {
                double *restrict ni = xn + i * nl;
                const double *restrict xi = b->x + i * nl;
                for (int64_t l = 0; l < nv; ++l) ni[l] = b->active[l] ? ni[l] : xi[l];
            }
        double *const xold = b->x;
        b->x = xn;
        xn = xold;
        /* Outputs, the end of a trajectory: the vector pass leaves out the lanes with
         * nothing to do (active, no output time passed, not at the final time, under the
         * step limit; every lane with events). */
        vec_quiet(b, hit, ev != NULL, dir, o->max_steps, todo);
        for (int64_t l = 0; l < nv; ++l) {
            if (!todo[l] || !b->active[l]) continue;
            const int st = ev && w.stop[l];
            const double tlim = st ? w.tstop[l] : b->tl[l];
            while (b->kout[l] < b->nt) {
                const double tk = b->t_eval[b->kout[l]];
                if (!(dir * (tlim - tk) > 0.0 || (st && tk == tlim))) break;
                horner_lane(coef, p, n, cs, l, tk - told[l],
                            b->y + (b->gid[l] * b->nt + b->kout[l]) * n, 1);
                b->kout[l] += 1;
            }
            if (st) { /* a terminal event ended the trajectory */
                b->tl[l] = w.tstop[l];
                nh_end_early(b, l);
                continue;
            }
            if (hit[l]) { /* landed on the final output time */
                while (b->kout[l] < b->nt) {
                    nh_store(b, l, b->kout[l]);
                    b->kout[l] += 1;
                }
                nh_retire(b, l);
                continue;
            }
            if (steps[l] >= o->max_steps) nh_fail(b, l, NH_LANE_MAX_STEPS);
        }
        idle = nl; /* padding slots are always idle */
        for (int64_t l = 0; l < nv; ++l) idle -= b->active[l];
    }
    if (b->x != x_home) { /* the block's state goes back to its own buffer */
        memcpy(x_home, b->x, sizeof(double) * (size_t)m);
        b->x = x_home;
    }
    free(mem);
    free(flags);
    nh_ev_free(&w);
    return rc;
}
