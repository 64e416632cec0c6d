/* Explicit Runge-Kutta schemes over a block of lanes: classical RK4 (fixed step) and the
 * embedded pairs Dormand-Prince 5(4) and DOP853 with a step size per lane. Every inner loop
 * runs over lanes. Output times are hit exactly by shortening the step that would pass them;
 * with b->dense (DOP853) they come from the continuous extension instead (see dense_stages). */
#include "nh_block.h"
#include "tableaux.h"

/* ---------------------------------------------------------------- RK4 (fixed step) ---- */

NH_CLONES int nh_rk4_step(nh_block *b, double t, double h, double *work, double *dx) {
    const int64_t n = b->n, nl = b->nl, m = n * nl;
    double *k = work, *xs = work + m, *tt = work + 2 * m;
    int rc;
    static const double c[4] = {0.0, 0.5, 0.5, 1.0};
    static const double w[4] = {1.0 / 6.0, 1.0 / 3.0, 1.0 / 3.0, 1.0 / 6.0};
    for (int s = 0; s < 4; ++s) {
        for (int64_t l = 0; l < nl; ++l) tt[l] = t + c[s] * h;
        if (s == 0) {
            rc = nh_rhs(b, tt, b->x, k);
        } else {
            const double a = c[s] * h;
            for (int64_t i = 0; i < m; ++i) xs[i] = b->x[i] + a * k[i];
            rc = nh_rhs(b, tt, xs, k);
        }
        if (rc != NH_OK) return rc;
        const double ws = w[s] * h;
        if (s == 0)
            for (int64_t i = 0; i < m; ++i) dx[i] = ws * k[i];
        else
            for (int64_t i = 0; i < m; ++i) dx[i] += ws * k[i];
    }
    return NH_OK;
}

/* ------------------------------------------------------- embedded pairs (adaptive) ---- */

/* err^expo for the step-size controller; the DOP853 exponent -1/8 without pow(). */
static inline double ctrl(double e, double expo) {
    return expo == -0.125 ? 1.0 / sqrt(sqrt(sqrt(e))) : pow(e, expo);
}

typedef struct {
    int stages;       /* explicit stages before the FSAL evaluation */
    const double *A;  /* [stages][stages] */
    const double *B;  /* [stages] */
    const double *C;  /* [stages] */
    int order;        /* exponent of the step-size controller: err^(-1/order) */
} nh_pair;

/* Per-lane error norm of one trial step; K[s] are the stage derivatives (K[stages] = FSAL). */
NH_INLINE void err_dopri5(const nh_block *b, double *const *K, const double *restrict x,
                       const double *restrict xn, const double *restrict h, double *restrict err) {
    const int64_t n = b->n, nl = b->nl;
    const double rtol = b->opt->rtol, atol = b->opt->atol;
    for (int64_t l = 0; l < nl; ++l) err[l] = 0.0;
    for (int64_t i = 0; i < n; ++i) {
        for (int64_t l0 = 0; l0 < nl; l0 += NH_CHUNK) {
            const int64_t o = i * nl + l0;
            double acc[NH_CHUNK];
            nh_wsum(acc, DP5_E, DP5_S + 1, K, o);
            for (int c = 0; c < NH_CHUNK; ++c) {
                const double sc = atol + rtol * NH_MAX(fabs(x[o + c]), fabs(xn[o + c]));
                const double r = h[l0 + c] * acc[c] / sc;
                err[l0 + c] += r * r;
            }
        }
    }
    for (int64_t l = 0; l < nl; ++l) err[l] = sqrt(err[l] / (double)n);
}

NH_INLINE void err_dop853(const nh_block *b, double *const *K, const double *restrict x,
                       const double *restrict xn, const double *restrict h, double *restrict err,
                       double *restrict e5) {
    const int64_t n = b->n, nl = b->nl;
    const double rtol = b->opt->rtol, atol = b->opt->atol;
    for (int64_t l = 0; l < nl; ++l) err[l] = e5[l] = 0.0; /* err holds the E3 sum first */
    for (int64_t i = 0; i < n; ++i) {
        for (int64_t l0 = 0; l0 < nl; l0 += NH_CHUNK) {
            const int64_t o = i * nl + l0;
            double a5[NH_CHUNK], a3[NH_CHUNK];
            nh_wsum(a5, DOP853_E5, DOP853_S, K, o);
            nh_wsum(a3, DOP853_E3, DOP853_S, K, o);
            for (int c = 0; c < NH_CHUNK; ++c) {
                const double sc = atol + rtol * NH_MAX(fabs(x[o + c]), fabs(xn[o + c]));
                const double r5 = a5[c] / sc, r3 = a3[c] / sc;
                e5[l0 + c] += r5 * r5;
                err[l0 + c] += r3 * r3;
            }
        }
    }
    for (int64_t l = 0; l < nl; ++l) {
        const double den = e5[l] + 0.01 * err[l];
        err[l] = den > 0.0 ? fabs(h[l]) * e5[l] / sqrt(den * (double)n) : 0.0;
    }
}

/* Hairer's starting step (Solving ODEs I, II.4) for the slots in `fresh`; f0 = f(t0, x0).
 * Uses xs, f1, tt and d (3 nl) as scratch. */
static int initial_step(nh_block *b, const nh_pair *p, const unsigned char *fresh,
                        const double *f0, double dir, double *h, double *xs, double *f1,
                        double *tt, double *d) {
    const int64_t n = b->n, nl = b->nl;
    const double rtol = b->opt->rtol, atol = b->opt->atol;
    double *d0 = d, *d1 = d + nl, *d2 = d + 2 * nl, *h0 = tt; /* tt doubles as h0 until the call */
    const double span = fabs(b->t_eval[b->nt - 1] - b->t_eval[0]);
    for (int64_t l = 0; l < nl; ++l) d0[l] = d1[l] = d2[l] = 0.0;
    for (int64_t i = 0; i < n; ++i)
        for (int64_t l = 0; l < nl; ++l) {
            const double sc = atol + rtol * fabs(b->x[i * nl + l]);
            const double a = b->x[i * nl + l] / sc, c = f0[i * nl + l] / sc;
            d0[l] += a * a;
            d1[l] += c * c;
        }
    for (int64_t l = 0; l < nl; ++l) {
        d0[l] = sqrt(d0[l] / (double)n);
        d1[l] = sqrt(d1[l] / (double)n);
        double hh = (d0[l] < 1e-5 || d1[l] < 1e-5) ? 1e-6 : 0.01 * d0[l] / d1[l];
        h0[l] = hh > span ? span : hh;
    }
    for (int64_t i = 0; i < n; ++i)
        for (int64_t l = 0; l < nl; ++l) xs[i * nl + l] = b->x[i * nl + l] + dir * h0[l] * f0[i * nl + l];
    for (int64_t l = 0; l < nl; ++l) {
        d0[l] = h0[l]; /* d0 is free again: keep h0 there */
        tt[l] = b->tl[l] + dir * h0[l];
    }
    int rc = nh_rhs_for(b, tt, xs, f1, fresh);
    if (rc != NH_OK) return rc;
    for (int64_t i = 0; i < n; ++i)
        for (int64_t l = 0; l < nl; ++l) {
            const double sc = atol + rtol * fabs(b->x[i * nl + l]);
            const double c = (f1[i * nl + l] - f0[i * nl + l]) / sc;
            d2[l] += c * c;
        }
    for (int64_t l = 0; l < nl; ++l) {
        if (!fresh[l]) continue;
        const double hz = d0[l];
        const double dd2 = sqrt(d2[l] / (double)n) / hz;
        const double mx = NH_MAX(d1[l], dd2);
        const double h1 = mx <= 1e-15 ? NH_MAX(1e-6, hz * 1e-3) : pow(0.01 / mx, 1.0 / (p->order + 1.0));
        double hh = NH_MIN(100.0 * hz, h1);
        if (!(hh > 0.0) || !isfinite(hh)) hh = hz;
        /* At least 100 times the step the driver calls an underflow (10 eps |t|), within the
         * span: a state of round-off size with a derivative of order 1 (x = 2e-16, x' = 2 cos
         * t at t = 1) made h0 = 0.01 d0 / d1 about 1e-18, and after one step the lane failed
         * with a step-size underflow where nothing is singular (Hairer's code stops there
         * too; SciPy raises its steps to 10 eps |t|). Too long a first step is rejected and
         * shrunk by the error control. */
        const double hmin = 1000.0 * 2.220446049250313e-16 * fabs(b->tl[l]);
        if (hh < hmin) hh = NH_MIN(hmin, span);
        h[l] = dir * hh;
    }
    return NH_OK;
}

/* DOP853's continuous extension on the accepted steps of the lanes in `need` (the step from
 * told to b->tl with size hu, old state b->x, new state xn, K[0..12] its stages, K[12] =
 * f(t+h, xn)): the three extra stages into K[13..15] (counted for `need` only, so a lane's
 * counters do not depend on its neighbours), then the polynomial coefficients F[0..6] (see
 * tableaux.h). Uses xs and tt as scratch. */
static int dense_stages(nh_block *b, double *const *K, double *const *F, const double *xn,
                        const double *hu, const double *told, const unsigned char *need,
                        double (*cx)[DOP853_SX], int (*ix)[DOP853_SX], const int *nx, double *xs,
                        double *tt) {
    const int64_t n = b->n, nl = b->nl;
    const int S = DOP853_S;
    for (int r = 0; r < 3; ++r) {
        nh_stage(n, nl, xs, b->x, hu, cx[r], ix[r], nx[r], K);
        for (int64_t l = 0; l < nl; ++l) tt[l] = told[l] + DOP853_CX[r] * hu[l];
        const int rc = nh_rhs_for(b, tt, xs, K[S + 1 + r], need);
        if (rc != NH_OK) return rc;
    }
    for (int64_t i = 0; i < n; ++i)
        for (int64_t l = 0; l < nl; ++l) {
            const int64_t o = i * nl + l;
            const double d = xn[o] - b->x[o];
            F[0][o] = d;
            F[1][o] = hu[l] * K[0][o] - d;
            F[2][o] = 2.0 * d - hu[l] * (K[S][o] + K[0][o]);
        }
    for (int k = 0; k < 4; ++k)
        for (int64_t i = 0; i < n; ++i)
            for (int64_t l0 = 0; l0 < nl; l0 += NH_CHUNK) {
                const int64_t o = i * nl + l0;
                double acc[NH_CHUNK];
                nh_wsum(acc, DOP853_D + k * DOP853_SX, DOP853_SX, K, o);
                for (int c = 0; c < NH_CHUNK; ++c) F[3 + k][o + c] = hu[l0 + c] * acc[c];
            }
    return NH_OK;
}

/* The continuous extension of lane l at theta (0..1 over the step): out[i * stride]. */
static inline void dense_at(const nh_block *b, double *const *F, int64_t l, double th,
                            double *out, int64_t stride) {
    const int64_t n = b->n, nl = b->nl;
    const double th1 = 1.0 - th;
    for (int64_t i = 0; i < n; ++i) {
        const int64_t o = i * nl + l;
        double v = F[6][o] * th;
        v = (v + F[5][o]) * th1;
        v = (v + F[4][o]) * th;
        v = (v + F[3][o]) * th1;
        v = (v + F[2][o]) * th;
        v = (v + F[1][o]) * th1;
        v = (v + F[0][o]) * th;
        out[i * stride] = b->x[o] + v;
    }
}

/* nh_dense_fn of DOP853: ctx is F (the extension's coefficients). */
static void dense_cb(const nh_block *b, const void *ctx, int64_t l, double th, double *out,
                     int64_t stride) {
    dense_at(b, (double *const *)ctx, l, th, out, stride);
}

/* Doubles per lane slot of the block-wide work of DOPRI5 / DOP853 (stages, states; the
 * continuous extension's with dense), for the block's width (nh_block_width). */
int64_t nh_adaptive_work(int method, int64_t n, int dense) {
    const int64_t s = method == NH_DOPRI5 ? DP5_S : DOP853_S;
    return (s + 3 + (dense && method == NH_DOP853 ? 10 : 0)) * n;
}

NH_CLONES int nh_run_adaptive(nh_block *b) {
    const nh_options *o = b->opt;
    const int dp5 = o->method == NH_DOPRI5;
    nh_pair p;
    p.stages = dp5 ? DP5_S : DOP853_S;
    p.A = dp5 ? DP5_A : DOP853_A;
    p.B = dp5 ? DP5_B : DOP853_B;
    p.C = dp5 ? DP5_C : DOP853_C;
    p.order = dp5 ? 4 : 7;
    const int S = p.stages;
    const int64_t n = b->n, nl = b->nl, m = n * nl;
    const double dir = b->t_eval[b->nt - 1] >= b->t_eval[0] ? 1.0 : -1.0;
    const double expo = -1.0 / (p.order + 1.0);
    const double safety = 0.9, facmin = 0.2, facmax = 10.0;
    const double hmax = o->hmax > 0.0 ? o->hmax : INFINITY;
    /* Refill idle slots once a chunk of them is idle. A refill costs two block-wide evaluations
     * (f(t0, x0) and the starting step), an idle slot one wasted lane-evaluation per stage;
     * measured, one chunk wastes fewer lane-evaluations than a quarter of the slots (see
     * benchmarks/NOTES.md). */
    const int64_t refill_at = NH_MIN(NH_CHUNK, b->nw);

    /* Stiffness test (see NH_LANE_STIFF): the pair's bound on h*|lambda|, Hairer's values. */
    const double stiff_bound = dp5 ? 3.25 : 6.1;
    const int64_t nstiff = o->nstiff;
    const int dense = b->dense && !dp5;
    const nh_events *ev = dense ? b->ev : NULL;
    const int64_t nev = ev ? ev->nev : 0;

    /* K[0..S]: stage derivatives (K[S] = FSAL), xs, xn, then per-lane arrays. */
    /* dense: K[S+1..S+3] (extra stages), F[0..6], told (nl) */
    const size_t nbuf = (size_t)((S + 3) * m + 11 * nl + (dense ? 10 * m + nl : 0));
    double *buf = (double *)calloc(nbuf, sizeof(double)); /* zero: padding slots stay finite */
    unsigned char *flags = (unsigned char *)malloc((size_t)(4 * nl));
    int64_t *stiffc = (int64_t *)calloc((size_t)(2 * nl), sizeof(int64_t));
    nh_ev_work w;
    if (!buf || !flags || !stiffc || nh_ev_alloc(&w, ev, n, nl) != NH_OK) {
        free(buf);
        free(flags);
        free(stiffc);
        return NH_ERR_NOMEM;
    }
    double *K[DOP853_SX];
    for (int s = 0; s <= S; ++s) K[s] = buf + (size_t)s * m;
    double *xs = buf + (size_t)(S + 1) * m, *xn = xs + m;
    double *h = xn + m, *hu = h + nl, *tt = hu + nl, *err = tt + nl, *acc = err + nl; /* acc: 3 nl */
    double *target = acc + 3 * nl, *hprop = target + nl;
    double *stnum = hprop + nl, *stden = stnum + nl; /* stiffness test: |dK|^2, |dY|^2 */
    int64_t *iasti = stiffc, *nonsti = stiffc + nl;  /* estimates above / below the bound */
    unsigned char *hit = flags, *fin = flags + nl, *fresh = flags + 2 * nl, *need = flags + 3 * nl;
    double *F[7], *told = NULL;
    double cx[3][DOP853_SX];
    int ix[3][DOP853_SX], nx[3];
    if (dense) {
        double *e = stden + nl;
        for (int r = 0; r < 3; ++r) K[S + 1 + r] = e + (size_t)r * m;
        for (int k = 0; k < 7; ++k) F[k] = e + (size_t)(3 + k) * m;
        told = e + 10 * m;
        for (int r = 0; r < 3; ++r) nx[r] = nh_sparse_row(DOP853_AX + r * DOP853_SX, S + 1 + r, cx[r], ix[r]);
    }
    int rc = NH_OK;
    /* Nonzero coefficients of each row of A and of B (DOP853's A is one third zeros). */
    double ca[13][13];
    int ia[13][13], na[13];
    for (int st = 1; st < S; ++st) na[st] = nh_sparse_row(p.A + st * S, st, ca[st], ia[st]);
    na[S] = nh_sparse_row(p.B, S, ca[S], ia[S]);
    int64_t idle = nl;
    const int64_t pad = nl - b->nw; /* padding slots, always idle */

    for (;;) {
        if (nh_stopping(b)) { /* the driver marks the unfinished trajectories */
            rc = NH_ERR_INTERRUPTED;
            break;
        }
        /* Load waiting trajectories into idle slots: f(t0, x0) and a starting step. */
        if (nh_pending(b) && (idle - pad >= refill_at || idle == nl)) {
            if (nh_refill(b, fresh) > 0) {
                rc = nh_rhs_for(b, b->tl, b->x, K[S], fresh);
                if (rc != NH_OK) break;
                for (int64_t i = 0; i < n; ++i)
                    for (int64_t l = 0; l < nl; ++l)
                        K[0][i * nl + l] = fresh[l] ? K[S][i * nl + l] : K[0][i * nl + l];
                if (ev) { /* g at the initial states */
                    rc = nh_ev_fresh(b, ev, fresh, &w);
                    if (rc != NH_OK) break;
                }
                nh_finite_lanes(b->x, n, nl, fin);
                nh_finite_lanes(K[0], n, nl, hit);
                for (int64_t l = 0; l < nl; ++l)
                    if (fresh[l] && b->active[l] && !(fin[l] && hit[l])) nh_fail(b, l, NH_LANE_NONFINITE);
                if (o->h > 0.0) {
                    for (int64_t l = 0; l < nl; ++l) h[l] = fresh[l] ? dir * o->h : h[l];
                } else {
                    rc = initial_step(b, &p, fresh, K[0], dir, h, xs, K[1], tt, acc);
                    if (rc != NH_OK) break;
                }
                for (int64_t l = 0; l < nl; ++l) {
                    if (fresh[l] && fabs(h[l]) > hmax) h[l] = dir * hmax;
                    if (fresh[l]) iasti[l] = nonsti[l] = 0;
                }
            }
        }
        if (nh_count_active(b) == 0) {
            if (nh_pending(b)) {
                idle = nl;
                continue;
            }
            break;
        }
        /* Step size of this trial, shortened to land on the next output time. */
        for (int64_t l = 0; l < nl; ++l) {
            hit[l] = 0;
            if (!b->active[l]) {
                hu[l] = 0.0;
                continue;
            }
            target[l] = b->t_eval[dense ? b->nt - 1 : b->kout[l]];
            const double rest = target[l] - b->tl[l];
            hu[l] = h[l];
            if (fabs(h[l]) >= fabs(rest) * (1.0 - 1e-12)) {
                hu[l] = rest;
                hit[l] = 1;
            }
        }
        /* Stages. */
        for (int st = 1; st < S; ++st) {
            nh_stage(n, nl, xs, b->x, hu, ca[st], ia[st], na[st], K);
            for (int64_t l = 0; l < nl; ++l) tt[l] = b->tl[l] + p.C[st] * hu[l];
            rc = nh_rhs(b, tt, xs, K[st]);
            if (rc != NH_OK) goto done;
        }
        nh_stage(n, nl, xn, b->x, hu, ca[S], ia[S], na[S], K);
        for (int64_t l = 0; l < nl; ++l) tt[l] = hit[l] ? target[l] : b->tl[l] + hu[l];
        rc = nh_rhs(b, tt, xn, K[S]);
        if (rc != NH_OK) goto done;
        if (dp5)
            err_dopri5(b, K, b->x, xn, hu, err);
        else
            err_dop853(b, K, b->x, xn, hu, err, acc);
        nh_finite_lanes(K[S], n, nl, fin);

        /* Accept or reject, lane by lane. */
        if (dense)
            for (int64_t l = 0; l < nl; ++l) told[l] = b->tl[l];
        for (int64_t l = 0; l < nl; ++l) {
            if (!b->active[l]) continue;
            const double e = err[l];
            const int ok = fin[l] && isfinite(e) && e <= 1.0;
            if (ok) {
                double fac = e == 0.0 ? facmax : safety * ctrl(e, expo);
                fac = NH_MIN(facmax, NH_MAX(facmin, fac));
                hprop[l] = hu[l] * fac;
                if (hit[l] && fabs(hprop[l]) < fabs(h[l])) hprop[l] = h[l];
                b->tl[l] = tt[l];
                nh_cnt(b, NH_STAT_STEPS)[l] += 1;
            } else {
                const double fac = (isfinite(e) && fin[l]) ? NH_MAX(facmin, safety * ctrl(e, expo)) : facmin;
                hprop[l] = hu[l] * fac;
                nh_cnt(b, NH_STAT_REJECTED)[l] += 1;
            }
            h[l] = fabs(hprop[l]) > hmax ? dir * hmax : hprop[l];
            hit[l] = ok ? (unsigned char)(1 + hit[l]) : 0; /* 1: accepted, 2: accepted at output */
        }
        /* Stiffness test on the accepted steps: xs still holds the last stage (c = 1), K[S-1]
         * its derivative, K[S] = f(t + h, xn). Reads only: the integration is the same with
         * the test on or off. */
        if (nstiff > 0) {
            for (int64_t l = 0; l < nl; ++l) stnum[l] = stden[l] = 0.0;
            for (int64_t i = 0; i < n; ++i)
                for (int64_t l = 0; l < nl; ++l) {
                    const double dk = K[S][i * nl + l] - K[S - 1][i * nl + l];
                    const double dy = xn[i * nl + l] - xs[i * nl + l];
                    stnum[l] += dk * dk;
                    stden[l] += dy * dy;
                }
            for (int64_t l = 0; l < nl; ++l) {
                if (!b->active[l] || !hit[l]) continue;
                if (nh_cnt(b, NH_STAT_STEPS)[l] % nstiff != 0 && iasti[l] == 0) continue;
                const double hlamb = stden[l] > 0.0 ? fabs(hu[l]) * sqrt(stnum[l] / stden[l]) : 0.0;
                if (hlamb > stiff_bound) {
                    nonsti[l] = 0;
                    iasti[l] += 1;
                } else if (++nonsti[l] == NH_STIFF_RESET) {
                    iasti[l] = 0;
                }
            }
        }
        if (dense) { /* outputs and events inside the accepted steps, from the extension */
            int64_t any = 0, anyev = 0;
            if (ev) { /* g at the ends of the steps */
                rc = ev->fn(ev->ctx, b->tl, xn, b->par, w.g1, b->nw, nl);
                if (rc != NH_OK) goto done;
            }
            for (int64_t l = 0; l < nl; ++l) {
                const int acc_l = b->active[l] && hit[l];
                unsigned char cr = 0;
                for (int64_t j = 0; j < nev && acc_l && !cr; ++j)
                    cr = (unsigned char)nh_ev_crossing(w.g0[j * nl + l], w.g1[j * nl + l], ev->direction[j]);
                if (ev) {
                    w.cross[l] = cr;
                    w.stop[l] = 0;
                }
                need[l] = (unsigned char)(acc_l && (cr || (b->kout[l] < b->nt &&
                                                          dir * (b->tl[l] - b->t_eval[b->kout[l]]) > 0.0)));
                any += need[l];
                anyev += cr;
            }
            if (any) {
                rc = dense_stages(b, K, F, xn, hu, told, need, cx, ix, nx, xs, tt);
                if (rc != NH_OK) goto done;
            }
            if (anyev) {
                rc = nh_ev_locate(b, ev, dense_cb, (const void *)F, hu, told, xn, &w);
                if (rc != NH_OK) goto done;
            }
            for (int64_t l = 0; l < nl; ++l) {
                if (!need[l]) continue;
                const int st = ev && w.stop[l];
                const double tlim = st ? w.tstop[l] : b->tl[l];
                while (b->kout[l] < b->nt) {
                    const double tk = b->t_eval[b->kout[l]];
                    if (!(dir * (tlim - tk) > 0.0 || (st && tk == tlim))) break;
                    dense_at(b, F, l, (tk - told[l]) / hu[l],
                             b->y + (b->gid[l] * b->nt + b->kout[l]) * n, 1);
                    b->kout[l] += 1;
                }
            }
            if (ev)
                for (int64_t j = 0; j < nev * nl; ++j)
                    if (b->active[j % nl] && hit[j % nl]) w.g0[j] = w.g1[j];
        }
        for (int64_t i = 0; i < n; ++i)
            for (int64_t l = 0; l < nl; ++l) {
                const int acc_l = hit[l] != 0;
                b->x[i * nl + l] = acc_l ? xn[i * nl + l] : b->x[i * nl + l];
                K[0][i * nl + l] = acc_l ? K[S][i * nl + l] : K[0][i * nl + l];
            }
        idle = 0;
        for (int64_t l = 0; l < nl; ++l) {
            if (!b->active[l]) {
                ++idle;
                continue;
            }
            if (ev && w.stop[l]) { /* a terminal event ended the trajectory */
                b->tl[l] = w.tstop[l];
                nh_end_early(b, l);
                ++idle;
                continue;
            }
            if (dense) { /* output times the step ended on exactly (the last one always) */
                while (hit[l] && b->kout[l] < b->nt && b->t_eval[b->kout[l]] == b->tl[l]) {
                    nh_store(b, l, b->kout[l]);
                    b->kout[l] += 1;
                }
            } else if (hit[l] == 2) {
                nh_store(b, l, b->kout[l]);
                b->kout[l] += 1;
            }
            if ((dense || hit[l] == 2) && b->kout[l] >= b->nt) {
                nh_retire(b, l);
                ++idle;
                continue;
            }
            if (iasti[l] >= NH_STIFF_POSITIVES) {
                nh_fail(b, l, NH_LANE_STIFF);
                ++idle;
            } else if (nh_cnt(b, NH_STAT_STEPS)[l] + nh_cnt(b, NH_STAT_REJECTED)[l] >= o->max_steps) {
                nh_fail(b, l, NH_LANE_MAX_STEPS);
                ++idle;
            } else if (fabs(h[l]) <= 10.0 * 2.220446049250313e-16 * NH_MAX(fabs(b->tl[l]), 1e-300) ||
                       fabs(h[l]) < 1e-300) {
                nh_fail(b, l, NH_LANE_STEP_UNDERFLOW);
                ++idle;
            }
        }
    }
done:
    free(buf);
    free(flags);
    free(stiffc);
    nh_ev_free(&w);
    return rc;
}
