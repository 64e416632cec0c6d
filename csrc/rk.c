/* Explicit Runge-Kutta schemes over a block of lanes: classical RK4 (fixed step) and the
 * embedded pairs Dormand-Prince 5(4) and DOP853 with a step size per lane. Every inner loop
 * runs over lanes. Output times are hit exactly by shortening the step that would pass them. */
#include "nh_block.h"
#include "tableaux.h"

/* ---------------------------------------------------------------- RK4 (fixed step) ---- */

int nh_rk4_step(nh_block *b, double t, double h, double *work, double *dx) {
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

typedef struct {
    int stages;       /* explicit stages before the FSAL evaluation */
    const double *A;  /* [stages][stages] */
    const double *B;  /* [stages] */
    const double *C;  /* [stages] */
    int order;        /* exponent of the step-size controller: err^(-1/order) */
} nh_pair;

/* Per-lane error norm of one trial step; K[s] are the stage derivatives (K[stages] = FSAL). */
static void err_dopri5(const nh_block *b, double *const *K, const double *x, const double *xn,
                       const double *h, double *err, double *acc) {
    const int64_t n = b->n, nl = b->nl;
    const double rtol = b->opt->rtol, atol = b->opt->atol;
    for (int64_t l = 0; l < nl; ++l) err[l] = 0.0;
    for (int64_t i = 0; i < n; ++i) {
        for (int64_t l = 0; l < nl; ++l) acc[l] = 0.0;
        for (int s = 0; s <= DP5_S; ++s) {
            const double e = DP5_E[s];
            if (e == 0.0) continue;
            const double *ks = K[s] + i * nl;
            for (int64_t l = 0; l < nl; ++l) acc[l] += e * ks[l];
        }
        for (int64_t l = 0; l < nl; ++l) {
            const double sc = atol + rtol * fmax(fabs(x[i * nl + l]), fabs(xn[i * nl + l]));
            const double r = h[l] * acc[l] / sc;
            err[l] += r * r;
        }
    }
    for (int64_t l = 0; l < nl; ++l) err[l] = sqrt(err[l] / (double)n);
}

static void err_dop853(const nh_block *b, double *const *K, const double *x, const double *xn,
                       const double *h, double *err, double *acc) {
    const int64_t n = b->n, nl = b->nl;
    const double rtol = b->opt->rtol, atol = b->opt->atol;
    double *acc3 = acc + nl, *e5 = acc + 2 * nl;
    for (int64_t l = 0; l < nl; ++l) err[l] = e5[l] = 0.0; /* err holds the E3 sum here */
    for (int64_t i = 0; i < n; ++i) {
        for (int64_t l = 0; l < nl; ++l) acc[l] = acc3[l] = 0.0;
        for (int s = 0; s < DOP853_S; ++s) {
            const double w5 = DOP853_E5[s], w3 = DOP853_E3[s];
            const double *ks = K[s] + i * nl;
            if (w5 != 0.0)
                for (int64_t l = 0; l < nl; ++l) acc[l] += w5 * ks[l];
            if (w3 != 0.0)
                for (int64_t l = 0; l < nl; ++l) acc3[l] += w3 * ks[l];
        }
        for (int64_t l = 0; l < nl; ++l) {
            const double sc = atol + rtol * fmax(fabs(x[i * nl + l]), fabs(xn[i * nl + l]));
            const double r5 = acc[l] / sc, r3 = acc3[l] / sc;
            e5[l] += r5 * r5;
            err[l] += r3 * r3;
        }
    }
    for (int64_t l = 0; l < nl; ++l) {
        const double den = e5[l] + 0.01 * err[l];
        err[l] = den > 0.0 ? fabs(h[l]) * e5[l] / sqrt(den * (double)n) : 0.0;
    }
}

/* Hairer's starting step (Solving ODEs I, II.4), per lane; f0 = f(t0, x0). */
static int initial_step(nh_block *b, const nh_pair *p, const double *f0, double dir, double *h,
                        double *xs, double *f1, double *tt) {
    const int64_t n = b->n, nl = b->nl;
    const double rtol = b->opt->rtol, atol = b->opt->atol;
    double *d0 = (double *)malloc(sizeof(double) * (size_t)(3 * nl));
    if (!d0) return NH_ERR_NOMEM;
    double *d1 = d0 + nl, *d2 = d0 + 2 * nl;
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
        h[l] = (d0[l] < 1e-5 || d1[l] < 1e-5) ? 1e-6 : 0.01 * d0[l] / d1[l];
        const double span = fabs(b->t_eval[b->nt - 1] - b->t_eval[0]);
        if (h[l] > span) h[l] = span;
        tt[l] = b->tl[l] + dir * h[l];
    }
    for (int64_t i = 0; i < n; ++i)
        for (int64_t l = 0; l < nl; ++l) xs[i * nl + l] = b->x[i * nl + l] + dir * h[l] * f0[i * nl + l];
    int rc = nh_rhs(b, tt, xs, f1);
    if (rc == NH_OK) {
        for (int64_t i = 0; i < n; ++i)
            for (int64_t l = 0; l < nl; ++l) {
                const double sc = atol + rtol * fabs(b->x[i * nl + l]);
                const double c = (f1[i * nl + l] - f0[i * nl + l]) / sc;
                d2[l] += c * c;
            }
        for (int64_t l = 0; l < nl; ++l) {
            const double dd2 = sqrt(d2[l] / (double)n) / h[l];
            const double mx = fmax(d1[l], dd2);
            const double h1 = mx <= 1e-15 ? fmax(1e-6, h[l] * 1e-3) : pow(0.01 / mx, 1.0 / (p->order + 1.0));
            double hh = fmin(100.0 * h[l], h1);
            if (!(hh > 0.0) || !isfinite(hh)) hh = h[l];
            h[l] = dir * hh;
        }
    }
    free(d0);
    return rc;
}

int nh_run_adaptive(nh_block *b) {
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

    /* K[0..S]: stage derivatives (K[S] = FSAL), xs, xn, then per-lane arrays. */
    const size_t nbuf = (size_t)((S + 3) * m + 9 * nl);
    double *buf = (double *)malloc(sizeof(double) * nbuf);
    unsigned char *flags = (unsigned char *)malloc((size_t)(2 * nl));
    if (!buf || !flags) {
        free(buf);
        free(flags);
        return NH_ERR_NOMEM;
    }
    double *K[13];
    for (int s = 0; s <= S; ++s) K[s] = buf + (size_t)s * m;
    double *xs = buf + (size_t)(S + 1) * m, *xn = xs + m;
    double *h = xn + m, *hu = h + nl, *tt = hu + nl, *err = tt + nl, *acc = err + nl; /* acc: 3 nl */
    double *target = acc + 3 * nl, *hprop = target + nl;
    unsigned char *hit = flags, *fin = flags + nl;

    int rc = nh_rhs(b, b->tl, b->x, K[0]);
    if (rc != NH_OK) goto done;
    nh_finite_lanes(b->x, n, nl, fin);
    {
        unsigned char *fin2 = hit;
        nh_finite_lanes(K[0], n, nl, fin2);
        for (int64_t l = 0; l < nl; ++l)
            if (b->active[l] && !(fin[l] && fin2[l])) nh_fail(b, l, NH_LANE_NONFINITE);
    }
    if (o->h > 0.0) {
        for (int64_t l = 0; l < nl; ++l) h[l] = dir * o->h;
    } else {
        rc = initial_step(b, &p, K[0], dir, h, xs, K[1], tt);
        if (rc != NH_OK) goto done;
    }
    const double hmax = o->hmax > 0.0 ? o->hmax : INFINITY;
    for (int64_t l = 0; l < nl; ++l)
        if (fabs(h[l]) > hmax) h[l] = dir * hmax;

    while (nh_count_active(b) > 0) {
        /* Step size of this trial, shortened to land on the next output time. */
        for (int64_t l = 0; l < nl; ++l) {
            hit[l] = 0;
            if (!b->active[l]) {
                hu[l] = 0.0;
                continue;
            }
            target[l] = b->t_eval[b->kout[l]];
            const double rest = target[l] - b->tl[l];
            hu[l] = h[l];
            if (fabs(h[l]) >= fabs(rest) * (1.0 - 1e-12)) {
                hu[l] = rest;
                hit[l] = 1;
            }
        }
        /* Stages. */
        for (int s = 1; s < S; ++s) {
            const double *a = p.A + s * S;
            for (int64_t i = 0; i < n; ++i) {
                for (int64_t l = 0; l < nl; ++l) acc[l] = 0.0;
                for (int j = 0; j < s; ++j) {
                    if (a[j] == 0.0) continue;
                    const double *kj = K[j] + i * nl;
                    for (int64_t l = 0; l < nl; ++l) acc[l] += a[j] * kj[l];
                }
                for (int64_t l = 0; l < nl; ++l) xs[i * nl + l] = b->x[i * nl + l] + hu[l] * acc[l];
            }
            for (int64_t l = 0; l < nl; ++l) tt[l] = b->tl[l] + p.C[s] * hu[l];
            rc = nh_rhs(b, tt, xs, K[s]);
            if (rc != NH_OK) goto done;
        }
        for (int64_t i = 0; i < n; ++i) {
            for (int64_t l = 0; l < nl; ++l) acc[l] = 0.0;
            for (int j = 0; j < S; ++j) {
                if (p.B[j] == 0.0) continue;
                const double *kj = K[j] + i * nl;
                for (int64_t l = 0; l < nl; ++l) acc[l] += p.B[j] * kj[l];
            }
            for (int64_t l = 0; l < nl; ++l) xn[i * nl + l] = b->x[i * nl + l] + hu[l] * acc[l];
        }
        for (int64_t l = 0; l < nl; ++l) tt[l] = hit[l] ? target[l] : b->tl[l] + hu[l];
        rc = nh_rhs(b, tt, xn, K[S]);
        if (rc != NH_OK) goto done;
        if (dp5)
            err_dopri5(b, K, b->x, xn, hu, err, acc);
        else
            err_dop853(b, K, b->x, xn, hu, err, acc);
        nh_finite_lanes(K[S], n, nl, fin);

        /* Accept or reject, lane by lane. */
        for (int64_t l = 0; l < nl; ++l) {
            if (!b->active[l]) continue;
            const int64_t g = (b->lane0 + l) * NH_NSTATS;
            const double e = err[l];
            const int ok = fin[l] && isfinite(e) && e <= 1.0;
            if (ok) {
                double fac = e == 0.0 ? facmax : safety * pow(e, expo);
                fac = fmin(facmax, fmax(facmin, fac));
                hprop[l] = hu[l] * fac;
                if (hit[l] && fabs(hprop[l]) < fabs(h[l])) hprop[l] = h[l];
                b->tl[l] = tt[l];
                b->stats[g + NH_STAT_STEPS] += 1;
            } else {
                const double fac = (isfinite(e) && fin[l]) ? fmax(facmin, safety * pow(e, expo)) : facmin;
                hprop[l] = hu[l] * fac;
                b->stats[g + NH_STAT_REJECTED] += 1;
            }
            h[l] = fabs(hprop[l]) > hmax ? dir * hmax : hprop[l];
            hit[l] = ok ? (unsigned char)(1 + hit[l]) : 0; /* 1: accepted, 2: accepted at output */
        }
        for (int64_t i = 0; i < n; ++i)
            for (int64_t l = 0; l < nl; ++l) {
                const int acc_l = hit[l] != 0;
                b->x[i * nl + l] = acc_l ? xn[i * nl + l] : b->x[i * nl + l];
                K[0][i * nl + l] = acc_l ? K[S][i * nl + l] : K[0][i * nl + l];
            }
        for (int64_t l = 0; l < nl; ++l) {
            if (!b->active[l]) continue;
            const int64_t g = (b->lane0 + l) * NH_NSTATS;
            if (hit[l] == 2) {
                nh_store(b, l, b->kout[l]);
                b->kout[l] += 1;
                if (b->kout[l] >= b->nt) {
                    b->active[l] = 0;
                    continue;
                }
            }
            if (b->stats[g + NH_STAT_STEPS] + b->stats[g + NH_STAT_REJECTED] >= o->max_steps) {
                nh_fail(b, l, NH_LANE_MAX_STEPS);
            } else if (fabs(h[l]) <= 10.0 * 2.220446049250313e-16 * fmax(fabs(b->tl[l]), 1e-300) ||
                       fabs(h[l]) < 1e-300) {
                nh_fail(b, l, NH_LANE_STEP_UNDERFLOW);
            }
        }
    }
done:
    free(buf);
    free(flags);
    return rc;
}
