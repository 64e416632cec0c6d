/*
 * Hand-written C anchor: the embedded Veselova system on T*S^{n-1} in (gamma, m) variables,
 * the same equations as nhfast.systems.veselova_forms.veselova_embedded (potential 0):
 *
 *   w = A^{-1} m,  c = (A gamma, gamma),  r2 = |gamma|^2,
 *   gammadot = (w - (gamma.w)/r2 gamma) / c,     mdot = -(m . gammadot)/r2 gamma,
 *   m . gammadot = ((m.w) - (gamma.w)(gamma.m)/r2) / c.
 *
 * 16 n + 8 flops per lane, no division inside the component loops. Struct-of-arrays with
 * lanes innermost: component i of lane l at x[i*ld + l]. Integrators: classical RK4 at a fixed
 * step and DOP853 with a step size per lane (Hairer's error norm, step-size controller and
 * starting step), over blocks of VS_BLOCK lanes. The DOP853 coefficients come from
 * "dop853_tab.h", written next to this file at build time (benchmarks/anchors/hand_c/build.py).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dop853_tab.h" /* VS_S = 12, VS_A[12][12], VS_B[12], VS_C[12], VS_E3[13], VS_E5[13] */

#define VS_BLOCK 64
#define VS_MAX(a, b) ((a) > (b) ? (a) : (b))
#define VS_MIN(a, b) ((a) < (b) ? (a) : (b))

/* Right-hand side on nl lanes (nl <= ld); a and ia = 1/a are shared by all lanes. */
void vs_rhs(int64_t n, const double *restrict a, const double *restrict ia,
            const double *restrict x, double *restrict f, int64_t nl, int64_t ld) {
    for (int64_t l0 = 0; l0 < nl; l0 += VS_BLOCK) {
        const int64_t m = VS_MIN(VS_BLOCK, nl - l0);
        double c[VS_BLOCK], r2[VS_BLOCK], gw[VS_BLOCK], mw[VS_BLOCK], gm[VS_BLOCK];
        for (int64_t l = 0; l < m; ++l) c[l] = r2[l] = gw[l] = mw[l] = gm[l] = 0.0;
        for (int64_t k = 0; k < n; ++k) {
            const double *restrict g = x + k * ld + l0, *restrict p = x + (n + k) * ld + l0;
            const double ak = a[k], iak = ia[k];
            for (int64_t l = 0; l < m; ++l) {
                const double w = p[l] * iak;
                c[l] += ak * g[l] * g[l];
                r2[l] += g[l] * g[l];
                gw[l] += g[l] * w;
                mw[l] += p[l] * w;
                gm[l] += g[l] * p[l];
            }
        }
        double s[VS_BLOCK], ic[VS_BLOCK], q[VS_BLOCK];
        for (int64_t l = 0; l < m; ++l) {
            const double ir2 = 1.0 / r2[l];
            ic[l] = 1.0 / c[l];
            s[l] = gw[l] * ir2;
            q[l] = (mw[l] - s[l] * gm[l]) * ic[l] * ir2; /* (m . gammadot) / r2 */
        }
        for (int64_t k = 0; k < n; ++k) {
            const double *restrict g = x + k * ld + l0, *restrict p = x + (n + k) * ld + l0;
            double *restrict vk = f + k * ld + l0, *restrict mk = f + (n + k) * ld + l0;
            const double iak = ia[k];
            for (int64_t l = 0; l < m; ++l) {
                vk[l] = (p[l] * iak - s[l] * g[l]) * ic[l];
                mk[l] = -q[l] * g[l];
            }
        }
    }
}

typedef struct {
    int64_t n;
    const double *a, *ia;
} vs_ctx;

/* The same right-hand side behind nhfast's kernel ABI (parameters come through ctx). */
int vs_rhs_abi(void *ctx, const double *t, const double *x, const double *par, double *out,
               int64_t nl, int64_t ld) {
    (void)t;
    (void)par;
    const vs_ctx *c = (const vs_ctx *)ctx;
    vs_rhs(c->n, c->a, c->ia, x, out, nl, ld);
    return 0;
}

typedef int (*vs_kernel_fn)(void *, const double *, const double *, const double *, double *,
                            int64_t, int64_t);

/* Call any kernel of nhfast's ABI `reps` times on the same block (the timing harness used for
 * both the hand-written and the generated kernel). Returns the sum of the return codes. */
int64_t vs_repeat_kernel(vs_kernel_fn fn, void *ctx, const double *t, const double *x,
                         const double *par, double *out, int64_t nl, int64_t ld, int64_t reps) {
    int64_t rc = 0;
    for (int64_t r = 0; r < reps; ++r) rc += fn(ctx, t, x, par, out, nl, ld);
    return rc;
}

/* Load lanes [g0, g0+m) of row-major x0[ntraj][2n] into a SoA block of stride B. */
static void load_block(int64_t N, const double *x0, int64_t g0, int64_t m, int64_t B,
                       double *x) {
    for (int64_t l = 0; l < B; ++l) {
        const int64_t g = g0 + (l < m ? l : 0); /* idle slots copy the first lane */
        for (int64_t i = 0; i < N; ++i) x[i * B + l] = x0[g * N + i];
    }
}

static void store_block(int64_t N, const double *x, int64_t g0, int64_t m, int64_t B,
                        double *y) {
    for (int64_t l = 0; l < m; ++l)
        for (int64_t i = 0; i < N; ++i) y[(g0 + l) * N + i] = x[i * B + l];
}

/* Classical RK4 with nsteps steps of size h for ntraj trajectories; y[ntraj][2n] final states.
 * Returns the number of lane-evaluations of the right-hand side, or -1 without memory. */
int64_t vs_rk4(int64_t n, const double *a, int64_t ntraj, const double *x0, double h,
               int64_t nsteps, double *y) {
    const int64_t N = 2 * n, B = VS_BLOCK, M = N * B;
    double *buf = (double *)malloc(sizeof(double) * (size_t)(4 * M + n));
    if (!buf) return -1;
    double *x = buf, *k = x + M, *xs = k + M, *acc = xs + M, *ia = acc + M;
    for (int64_t i = 0; i < n; ++i) ia[i] = 1.0 / a[i];
    const double w[4] = {1.0 / 6.0, 1.0 / 3.0, 1.0 / 3.0, 1.0 / 6.0}, cs[4] = {0.0, 0.5, 0.5, 1.0};
    int64_t evals = 0;
    for (int64_t g0 = 0; g0 < ntraj; g0 += B) {
        const int64_t m = VS_MIN(B, ntraj - g0);
        load_block(N, x0, g0, m, B, x);
        for (int64_t st = 0; st < nsteps; ++st) {
            for (int s = 0; s < 4; ++s) {
                if (s == 0) {
                    vs_rhs(n, a, ia, x, k, B, B);
                } else {
                    const double hc = cs[s] * h;
                    for (int64_t i = 0; i < M; ++i) xs[i] = x[i] + hc * k[i];
                    vs_rhs(n, a, ia, xs, k, B, B);
                }
                const double ws = w[s] * h;
                if (s == 0)
                    for (int64_t i = 0; i < M; ++i) acc[i] = ws * k[i];
                else
                    for (int64_t i = 0; i < M; ++i) acc[i] += ws * k[i];
            }
            for (int64_t i = 0; i < M; ++i) x[i] += acc[i];
        }
        evals += 4 * nsteps * m;
        store_block(N, x, g0, m, B, y);
    }
    free(buf);
    return evals;
}

/* DOP853 from t = 0 to t_end with a step size per lane; y[ntraj][2n] final states.
 * Returns the number of lane-evaluations of the right-hand side made while each lane was
 * still integrating (a finished lane idles until its block is done), -1 without memory, -2 when a lane used up
 * max_steps or its step underflowed. */
int64_t vs_dop853(int64_t n, const double *a, int64_t ntraj, const double *x0, double t_end,
                  double rtol, double atol, int64_t max_steps, double *y) {
    const int64_t N = 2 * n, B = VS_BLOCK, M = N * B;
    double *buf = (double *)malloc(sizeof(double) * (size_t)((VS_S + 6) * M + 12 * B + n));
    if (!buf) return -1;
    double *K[VS_S + 1];
    for (int s = 0; s <= VS_S; ++s) K[s] = buf + s * M;
    double *x = buf + (VS_S + 1) * M, *xs = x + M, *xn = xs + M, *s3 = xn + M, *s5 = s3 + M;
    double *h = s5 + M, *t = h + B, *hu = t + B, *e3 = hu + B, *e5 = e3 + B, *err = e5 + B;
    double *d0 = err + B, *d1 = d0 + B, *d2 = d1 + B, *h0 = d2 + B, *steps = h0 + B,
           *act = steps + B, *ia = act + B;
    for (int64_t i = 0; i < n; ++i) ia[i] = 1.0 / a[i];
    const double expo = -1.0 / 8.0;
    int64_t evals = 0, bad = 0;
    for (int64_t g0 = 0; g0 < ntraj; g0 += B) {
        const int64_t m = VS_MIN(B, ntraj - g0);
        load_block(N, x0, g0, m, B, x);
        /* f(x0) and Hairer's starting step (Solving ODEs I, II.4). */
        vs_rhs(n, a, ia, x, K[0], B, B);
        for (int64_t l = 0; l < B; ++l) d0[l] = d1[l] = d2[l] = 0.0;
        for (int64_t i = 0; i < N; ++i)
            for (int64_t l = 0; l < B; ++l) {
                const double sc = atol + rtol * fabs(x[i * B + l]);
                const double u = x[i * B + l] / sc, v = K[0][i * B + l] / sc;
                d0[l] += u * u;
                d1[l] += v * v;
            }
        for (int64_t l = 0; l < B; ++l) {
            d0[l] = sqrt(d0[l] / (double)N);
            d1[l] = sqrt(d1[l] / (double)N);
            const double hh = (d0[l] < 1e-5 || d1[l] < 1e-5) ? 1e-6 : 0.01 * d0[l] / d1[l];
            h0[l] = VS_MIN(hh, t_end);
        }
        for (int64_t i = 0; i < N; ++i)
            for (int64_t l = 0; l < B; ++l) xs[i * B + l] = x[i * B + l] + h0[l] * K[0][i * B + l];
        vs_rhs(n, a, ia, xs, K[1], B, B);
        for (int64_t i = 0; i < N; ++i)
            for (int64_t l = 0; l < B; ++l) {
                const double sc = atol + rtol * fabs(x[i * B + l]);
                const double v = (K[1][i * B + l] - K[0][i * B + l]) / sc;
                d2[l] += v * v;
            }
        for (int64_t l = 0; l < B; ++l) {
            const double dd2 = sqrt(d2[l] / (double)N) / h0[l];
            const double mx = VS_MAX(d1[l], dd2);
            const double h1 = mx <= 1e-15 ? VS_MAX(1e-6, h0[l] * 1e-3) : pow(0.01 / mx, 1.0 / 8.0);
            h[l] = VS_MIN(100.0 * h0[l], h1);
            t[l] = 0.0;
            steps[l] = 0.0;
            act[l] = l < m ? 1.0 : 0.0;
        }
        int64_t live = m;
        evals += 2 * m;
        while (live > 0) {
            for (int64_t l = 0; l < B; ++l) {
                const double rest = t_end - t[l];
                hu[l] = act[l] == 0.0 ? 0.0 : (h[l] >= rest * (1.0 - 1e-12) ? rest : h[l]);
            }
            for (int s = 1; s <= VS_S; ++s) {
                /* stage s (s == VS_S: the new state, then its derivative, FSAL) */
                const double *w = s < VS_S ? VS_A[s] : VS_B;
                double *dst = s < VS_S ? xs : xn;
                for (int64_t i = 0; i < M; ++i) dst[i] = 0.0;
                for (int j = 0; j < s; ++j) {
                    const double wj = w[j];
                    if (wj == 0.0) continue;
                    const double *restrict kj = K[j];
                    for (int64_t i = 0; i < M; ++i) dst[i] += wj * kj[i];
                }
                for (int64_t i = 0; i < N; ++i)
                    for (int64_t l = 0; l < B; ++l) dst[i * B + l] = x[i * B + l] + hu[l] * dst[i * B + l];
                vs_rhs(n, a, ia, dst, K[s], B, B);
                evals += live;
            }
            for (int64_t i = 0; i < M; ++i) s3[i] = s5[i] = 0.0;
            for (int j = 0; j <= VS_S; ++j) {
                const double w3 = VS_E3[j], w5 = VS_E5[j];
                if (w3 == 0.0 && w5 == 0.0) continue;
                const double *restrict kj = K[j];
                for (int64_t i = 0; i < M; ++i) {
                    s3[i] += w3 * kj[i];
                    s5[i] += w5 * kj[i];
                }
            }
            for (int64_t l = 0; l < B; ++l) e3[l] = e5[l] = 0.0;
            for (int64_t i = 0; i < N; ++i)
                for (int64_t l = 0; l < B; ++l) {
                    const double sc = atol + rtol * VS_MAX(fabs(x[i * B + l]), fabs(xn[i * B + l]));
                    const double u3 = s3[i * B + l] / sc, u5 = s5[i * B + l] / sc;
                    e3[l] += u3 * u3;
                    e5[l] += u5 * u5;
                }
            for (int64_t l = 0; l < B; ++l) {
                const double den = e5[l] + 0.01 * e3[l];
                err[l] = den > 0.0 ? fabs(hu[l]) * e5[l] / sqrt(den * (double)N) : 0.0;
            }
            for (int64_t l = 0; l < B; ++l) {
                if (act[l] == 0.0) continue;
                const int ok = isfinite(err[l]) && err[l] <= 1.0;
                if (ok) {
                    const double fac = err[l] == 0.0 ? 10.0 : 0.9 * pow(err[l], expo);
                    const double hn = hu[l] * VS_MIN(10.0, VS_MAX(0.2, fac));
                    t[l] = (hu[l] == t_end - t[l]) ? t_end : t[l] + hu[l];
                    for (int64_t i = 0; i < N; ++i) {
                        x[i * B + l] = xn[i * B + l];
                        K[0][i * B + l] = K[VS_S][i * B + l];
                    }
                    h[l] = hn;
                    if (t[l] >= t_end) {
                        act[l] = 0.0;
                        --live;
                    }
                } else {
                    const double fac = isfinite(err[l]) ? VS_MAX(0.2, 0.9 * pow(err[l], expo)) : 0.2;
                    h[l] = hu[l] * fac;
                }
                steps[l] += 1.0;
                if (act[l] != 0.0 && (steps[l] >= (double)max_steps || h[l] < 1e-14 * t_end)) {
                    act[l] = 0.0;
                    --live;
                    bad = 1;
                }
            }
        }
        store_block(N, x, g0, m, B, y);
    }
    free(buf);
    return bad ? -2 : evals;
}
