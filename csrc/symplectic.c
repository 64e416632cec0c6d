/* Structure-preserving fixed-step schemes over a block of lanes, and the fixed-step driver:
 *   Stormer-Verlet / leapfrog (kick-drift-kick) for partitioned systems a' = F(b), b' = G(a);
 *   implicit midpoint and Gauss-Legendre collocation with 2 and 3 stages (orders 4 and 6),
 *   whose stage equations are solved by fixed-point iteration, lane by lane, to a tolerance
 *   with an iteration cap; a lane that does not converge is reported, never silently kept.
 * The state update uses compensated (Kahan) summation so that round-off does not drift. */
#include "nh_block.h"

/* Gauss-Legendre tableaux (Hairer, Lubich & Wanner, Geometric Numerical Integration, II.1). */
#define SQ3 1.7320508075688772935
#define SQ15 3.8729833462074168852
static const double GL1_A[1] = {0.5};
static const double GL1_B[1] = {1.0};
static const double GL1_C[1] = {0.5};
static const double GL2_A[4] = {0.25, 0.25 - SQ3 / 6.0, 0.25 + SQ3 / 6.0, 0.25};
static const double GL2_B[2] = {0.5, 0.5};
static const double GL2_C[2] = {0.5 - SQ3 / 6.0, 0.5 + SQ3 / 6.0};
static const double GL3_A[9] = {5.0 / 36.0, 2.0 / 9.0 - SQ15 / 15.0, 5.0 / 36.0 - SQ15 / 30.0,
                                5.0 / 36.0 + SQ15 / 24.0, 2.0 / 9.0, 5.0 / 36.0 - SQ15 / 24.0,
                                5.0 / 36.0 + SQ15 / 30.0, 2.0 / 9.0 + SQ15 / 15.0, 5.0 / 36.0};
static const double GL3_B[3] = {5.0 / 18.0, 4.0 / 9.0, 5.0 / 18.0};
static const double GL3_C[3] = {0.5 - SQ15 / 10.0, 0.5, 0.5 + SQ15 / 10.0};

static int gauss_stages(int method) {
    return method == NH_MIDPOINT ? 1 : method == NH_GAUSS4 ? 2 : 3;
}

int64_t nh_fixed_work(int method, int64_t n, int64_t nl) {
    const int64_t m = n * nl;
    switch (method) {
    case NH_RK4:
        return 2 * m + nl;
    case NH_LEAPFROG:
        return 3 * m + nl;
    default: {
        const int64_t s = gauss_stages(method);
        return (2 * s + 1) * m + 4 * nl;
    }
    }
}

/* ------------------------------------------------------------------- leapfrog ---- */

NH_CLONES int nh_leapfrog_step(nh_block *b, double t, double h, double *work, double *dx, int *fresh) {
    const int64_t n = b->n, nl = b->nl, m = n * nl, k = b->sys->split;
    double *g0 = work, *f = work + m, *xs = work + 2 * m, *tt = work + 3 * m;
    int rc;
    if (*fresh) { /* G(a) at the start of the step; later steps reuse the last kick's value. */
        for (int64_t l = 0; l < nl; ++l) tt[l] = t;
        rc = nh_rhs(b, tt, b->x, g0);
        if (rc != NH_OK) return rc;
        *fresh = 0;
    }
    /* kick: b_half = b + h/2 G(a) */
    for (int64_t i = 0; i < k * nl; ++i) xs[i] = b->x[i];
    for (int64_t i = k * nl; i < m; ++i) xs[i] = b->x[i] + 0.5 * h * g0[i];
    for (int64_t l = 0; l < nl; ++l) tt[l] = t + 0.5 * h;
    rc = nh_rhs(b, tt, xs, f);
    if (rc != NH_OK) return rc;
    /* drift: a1 = a + h F(b_half) */
    for (int64_t i = 0; i < k * nl; ++i) {
        dx[i] = h * f[i];
        xs[i] = b->x[i] + dx[i];
    }
    for (int64_t l = 0; l < nl; ++l) tt[l] = t + h;
    rc = nh_rhs(b, tt, xs, f);
    if (rc != NH_OK) return rc;
    /* kick: b1 = b_half + h/2 G(a1) */
    for (int64_t i = k * nl; i < m; ++i) {
        dx[i] = 0.5 * h * (g0[i] + f[i]);
        g0[i] = f[i];
    }
    return NH_OK;
}

/* -------------------------------------------------------------- Gauss-Legendre ---- */

NH_CLONES int nh_gauss_step(nh_block *b, int s, double t, double h, double *work, double *dx,
                  unsigned char *ok, int *fresh) {
    const int64_t n = b->n, nl = b->nl, m = n * nl;
    const double *A = s == 1 ? GL1_A : s == 2 ? GL2_A : GL3_A;
    const double *B = s == 1 ? GL1_B : s == 2 ? GL2_B : GL3_B;
    const double *C = s == 1 ? GL1_C : s == 2 ? GL2_C : GL3_C;
    double *Z = work, *K = work + s * m, *xs = work + 2 * s * m;
    double *const Ks[3] = {K, K + m, K + 2 * m};
    double *tt = xs + m, *dmax = tt + nl, *xmax = dmax + nl, *dprev = xmax + nl;
    unsigned char *conv = ok; /* 1: lane finished iterating (frozen); ends as the ok flag */
    const double tol = b->opt->tol;
    int rc = NH_OK;

    if (*fresh) {
        for (int64_t i = 0; i < s * m; ++i) Z[i] = 0.0;
        *fresh = 0;
    } else {
        /* start from the previous step's stage derivatives (still in K): Z = h A K */
        for (int st = 0; st < s; ++st)
            for (int64_t o = 0; o < m; o += NH_CHUNK) {
                double z[NH_CHUNK];
                nh_wsum(z, A + st * s, s, Ks, o);
                for (int c = 0; c < NH_CHUNK; ++c) Z[st * m + o + c] = h * z[c];
            }
    }
    for (int64_t l = 0; l < nl; ++l) {
        conv[l] = !b->active[l];
        xmax[l] = 0.0;
    }
    for (int64_t i = 0; i < n; ++i)
        for (int64_t l = 0; l < nl; ++l) xmax[l] = NH_MAX(xmax[l], fabs(b->x[i * nl + l]));
    for (int64_t i = 0; i < m; ++i) dx[i] = 0.0;

    for (int64_t l = 0; l < nl; ++l) dprev[l] = INFINITY;
    for (int64_t it = 0; it < b->opt->max_iter; ++it) {
        if (it > 0 && nh_stopping(b)) return NH_ERR_INTERRUPTED;
        const int last = it + 1 == b->opt->max_iter;
        for (int st = 0; st < s; ++st) {
            for (int64_t i = 0; i < m; ++i) xs[i] = b->x[i] + Z[st * m + i];
            for (int64_t l = 0; l < nl; ++l) tt[l] = t + C[st] * h;
            /* count the evaluation only for lanes still iterating: a lane's statistics
             * must not depend on the other lanes of its block */
            rc = b->sys->rhs(b->sys->ctx, tt, xs, b->par, K + st * m, b->nw, nl);
            if (rc != NH_OK) return rc;
            int64_t *restrict cr = nh_cnt(b, NH_STAT_RHS);
            for (int64_t l = 0; l < nl; ++l) cr[l] += !conv[l];
        }
        for (int64_t l = 0; l < nl; ++l) dmax[l] = 0.0;
        for (int st = 0; st < s; ++st)
            for (int64_t i = 0; i < n; ++i)
                for (int64_t l0 = 0; l0 < nl; l0 += NH_CHUNK) {
                    const int64_t o = i * nl + l0;
                    double z[NH_CHUNK];
                    nh_wsum(z, A + st * s, s, Ks, o);
                    double *restrict zq = Z + st * m + o;
                    for (int c = 0; c < NH_CHUNK; ++c) {
                        const double zc = h * z[c];
                        const double d = fabs(zc - zq[c]);
                        double *dm = dmax + l0 + c;
                        *dm = d > *dm ? d : (d != d ? d : *dm); /* NaN propagates */
                        zq[c] = conv[l0 + c] ? zq[c] : zc;
                    }
                }
        int64_t left = 0;
        for (int64_t l = 0; l < nl; ++l) {
            if (conv[l]) continue;
            nh_cnt(b, NH_STAT_ITER)[l] += 1;
            /* Within tolerance, keep iterating while the update still shrinks (it then stops
             * at round-off level, so no systematic iteration error accumulates over steps). */
            const int small = dmax[l] <= tol * (1.0 + xmax[l]);
            if (!isfinite(dmax[l])) { /* NaN/inf stage: stop; the driver reports the lane */
                conv[l] = 1;
                for (int64_t i = 0; i < n; ++i) dx[i * nl + l] = NAN;
            } else if (small && (dmax[l] == 0.0 || dmax[l] >= dprev[l] || last)) {
                /* converged: K holds f at stages within round-off of the fixed point */
                conv[l] = 1;
                for (int64_t i = 0; i < n; ++i) {
                    double acc = 0.0;
                    for (int j = 0; j < s; ++j) acc += B[j] * K[j * m + i * nl + l];
                    dx[i * nl + l] = h * acc;
                }
            } else {
                ++left;
            }
            dprev[l] = dmax[l];
        }
        if (left == 0) break;
    }
    /* ok[l] (= conv[l]) is 0 exactly for the lanes that hit the iteration cap */
    return rc;
}

/* ------------------------------------------------------------ fixed-step driver ---- */

NH_CLONES int nh_run_fixed(nh_block *b) {
    const nh_options *o = b->opt;
    const int64_t n = b->n, nl = b->nl, m = n * nl;
    const double h = o->h;
    if (!(h > 0.0)) return NH_ERR_ARG;

    /* Substeps per output interval; the whole budget is checked before any work (in double
     * first: a count beyond the budget is never converted to an integer). */
    int64_t total = 0;
    for (int64_t k = 1; k < b->nt; ++k) {
        const double dt = fabs(b->t_eval[k] - b->t_eval[k - 1]);
        const double q = ceil(dt / h * (1.0 - 1e-12));
        const int over = !(q < 9.0e18) || (q >= 1.0 && (int64_t)q > o->max_steps - total);
        total += over ? 0 : q < 1.0 ? 1 : (int64_t)q;
        if (over || total > o->max_steps) {
            for (int64_t l = 0; l < nl; ++l)
                if (b->active[l]) nh_fail(b, l, NH_LANE_MAX_STEPS);
            return NH_OK;
        }
    }
    /* zeroed: the padding slots (l >= nw) are never written by the kernels */
    double *buf = (double *)calloc((size_t)(nh_fixed_work(o->method, n, nl) + 2 * m), sizeof(double));
    unsigned char *ok = (unsigned char *)malloc((size_t)(2 * nl));
    if (!buf || !ok) {
        free(buf);
        free(ok);
        return NH_ERR_NOMEM;
    }
    double *dx = buf, *comp = buf + m, *work = buf + 2 * m;
    unsigned char *fin = ok + nl;
    for (int64_t i = 0; i < m; ++i) comp[i] = 0.0;
    int fresh = 1, rc = NH_OK;

    for (int64_t k = 1; k < b->nt && rc == NH_OK; ++k) {
        const double t0 = b->t_eval[k - 1], dt = b->t_eval[k] - t0;
        const double q = ceil(fabs(dt) / h * (1.0 - 1e-12));
        const int64_t msub = q < 1.0 ? 1 : (int64_t)q;
        const double hs = dt / (double)msub;
        for (int64_t j = 0; j < msub; ++j) {
            if (nh_count_active(b) == 0) break;
            if (nh_stopping(b)) { /* the driver marks the unfinished trajectories */
                rc = NH_ERR_INTERRUPTED;
                break;
            }
            const double t = t0 + (double)j * hs;
            for (int64_t l = 0; l < nl; ++l) ok[l] = 1;
            switch (o->method) {
            case NH_RK4:
                rc = nh_rk4_step(b, t, hs, work, dx);
                break;
            case NH_LEAPFROG:
                rc = nh_leapfrog_step(b, t, hs, work, dx, &fresh);
                break;
            default:
                rc = nh_gauss_step(b, gauss_stages(o->method), t, hs, work, dx, ok, &fresh);
                break;
            }
            if (rc != NH_OK) break;
            /* compensated update of the active lanes */
            for (int64_t i = 0; i < n; ++i)
                for (int64_t l = 0; l < nl; ++l) {
                    const int64_t p = i * nl + l;
                    const double d = dx[p] + comp[p];
                    const double xn = b->x[p] + d;
                    const int use = b->active[l] && ok[l];
                    comp[p] = use ? d - (xn - b->x[p]) : comp[p];
                    b->x[p] = use ? xn : b->x[p];
                }
            nh_finite_lanes(b->x, n, nl, fin);
            for (int64_t l = 0; l < nl; ++l) {
                if (!b->active[l]) continue;
                nh_cnt(b, NH_STAT_STEPS)[l] += 1;
                if (!ok[l])
                    nh_fail(b, l, NH_LANE_NOT_CONVERGED);
                else if (!fin[l])
                    nh_fail(b, l, NH_LANE_NONFINITE);
            }
        }
        if (rc != NH_OK) break; /* the state is mid-interval: no output row for it */
        for (int64_t l = 0; l < nl; ++l) {
            if (!b->active[l]) continue;
            b->tl[l] = b->t_eval[k];
            nh_store(b, l, k);
            b->kout[l] = k + 1;
            if (k + 1 == b->nt) nh_retire(b, l);
        }
    }
    free(buf);
    free(ok);
    return rc;
}
