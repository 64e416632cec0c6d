/*
 * Hand-written C anchor: the Veselova (LR) rigid body on SO(n) with the physical inertia
 * I(Om) = J Om + Om J, J = diag(j), in the variables (gamma, m), no potential; the same
 * equations as nhfast.systems.veselova_rigid_body(n, "physical"), derived by hand:
 *
 *   Omega = gamma ^ v = gamma v^T - v gamma^T,   v . gamma = 0,
 *   c = gamma . J gamma,   r2 = |gamma|^2,
 *   K w = (r2 J + c) w - (J gamma)(gamma . w) - gamma (J gamma . w) + gamma (gamma . w)
 *       (the reduced metric -I(gamma ^ w) gamma plus gamma gamma^T),
 *   K v = f := m - (gamma . m)/r2 gamma,
 *   gammadot = -Omega gamma = r2 v - gamma (gamma . v),      mdot = -(m . v) gamma.
 *
 * K = D + U C V^T with D = r2 j + c (diagonal), U = [p, q], V = [q, p - q], C = -1 and
 * p = J gamma, q = gamma, so Sherman-Morrison-Woodbury gives v in O(n):
 *
 *   S = -1 + V^T D^{-1} U (2 x 2),   g = V^T D^{-1} f,   t = S^{-1} g,
 *   v = D^{-1} (f - p t_1 - q t_2) = D^{-1} (f - gamma (j t_1 + t_2)).
 *
 * Four passes over the index per block of lanes (reductions r2, c, gamma.m; the capacitance;
 * v with gamma.v and m.v; the output), one division per component (1/D, kept in the m slot
 * of the output between passes). Struct-of-arrays with lanes innermost: component i of lane
 * l at x[i*ld + l]; the parameters j are per lane, par[i*ld + l], as in nhfast's kernel ABI.
 */
#include <stdint.h>

#define VP_BLOCK 64
#define VP_MIN(a, b) ((a) < (b) ? (a) : (b))

/* Right-hand side on nl lanes (nl <= ld); j per lane in par. */
void vp_rhs(int64_t n, const double *restrict par, const double *restrict x,
            double *restrict f, int64_t nl, int64_t ld) {
    for (int64_t l0 = 0; l0 < nl; l0 += VP_BLOCK) {
        const int64_t m = VP_MIN(VP_BLOCK, nl - l0);
        double r2[VP_BLOCK], c[VP_BLOCK], gm[VP_BLOCK];
        for (int64_t l = 0; l < m; ++l) r2[l] = c[l] = gm[l] = 0.0;
        /* pass 1: r2 = |gamma|^2, c = gamma . J gamma, gamma . m */
        for (int64_t k = 0; k < n; ++k) {
            const double *restrict g = x + k * ld + l0, *restrict p = x + (n + k) * ld + l0;
            const double *restrict jk = par + k * ld + l0;
            for (int64_t l = 0; l < m; ++l) {
                const double gg = g[l] * g[l];
                r2[l] += gg;
                c[l] += jk[l] * gg;
                gm[l] += g[l] * p[l];
            }
        }
        double s[VP_BLOCK], app[VP_BLOCK], apq[VP_BLOCK], aqq[VP_BLOCK], gp[VP_BLOCK],
            gq[VP_BLOCK];
        for (int64_t l = 0; l < m; ++l) {
            s[l] = gm[l] / r2[l];
            app[l] = apq[l] = aqq[l] = gp[l] = gq[l] = 0.0;
        }
        /* pass 2: iD = 1/(r2 j + c) (kept in the m slot of f), the capacitance sums */
        for (int64_t k = 0; k < n; ++k) {
            const double *restrict g = x + k * ld + l0, *restrict p = x + (n + k) * ld + l0;
            const double *restrict jk = par + k * ld + l0;
            double *restrict id = f + (n + k) * ld + l0;
            for (int64_t l = 0; l < m; ++l) {
                const double iD = 1.0 / (r2[l] * jk[l] + c[l]);
                const double fi = p[l] - s[l] * g[l];
                const double gi = g[l] * iD, pgi = jk[l] * gi;
                id[l] = iD;
                aqq[l] += g[l] * gi;
                apq[l] += g[l] * pgi;
                app[l] += jk[l] * g[l] * pgi;
                gq[l] += fi * gi;
                gp[l] += fi * pgi;
            }
        }
        double t1[VP_BLOCK], t2[VP_BLOCK], gv[VP_BLOCK], mv[VP_BLOCK];
        for (int64_t l = 0; l < m; ++l) {
            const double s11 = apq[l] - 1.0, s12 = aqq[l];
            const double s21 = app[l] - apq[l], s22 = apq[l] - aqq[l] - 1.0;
            const double g1 = gq[l], g2 = gp[l] - gq[l];
            const double idet = 1.0 / (s11 * s22 - s12 * s21);
            t1[l] = (s22 * g1 - s12 * g2) * idet;
            t2[l] = (s11 * g2 - s21 * g1) * idet;
            gv[l] = mv[l] = 0.0;
        }
        /* pass 3: v (kept in the gamma slot of f), gamma . v and m . v */
        for (int64_t k = 0; k < n; ++k) {
            const double *restrict g = x + k * ld + l0, *restrict p = x + (n + k) * ld + l0;
            const double *restrict jk = par + k * ld + l0;
            const double *restrict id = f + (n + k) * ld + l0;
            double *restrict vk = f + k * ld + l0;
            for (int64_t l = 0; l < m; ++l) {
                const double fi = p[l] - s[l] * g[l];
                const double v = (fi - g[l] * (jk[l] * t1[l] + t2[l])) * id[l];
                vk[l] = v;
                gv[l] += g[l] * v;
                mv[l] += p[l] * v;
            }
        }
        /* pass 4: gammadot = r2 v - gamma (gamma . v), mdot = -(m . v) gamma */
        for (int64_t k = 0; k < n; ++k) {
            const double *restrict g = x + k * ld + l0;
            double *restrict vk = f + k * ld + l0, *restrict mk = f + (n + k) * ld + l0;
            for (int64_t l = 0; l < m; ++l) {
                vk[l] = r2[l] * vk[l] - gv[l] * g[l];
                mk[l] = -mv[l] * g[l];
            }
        }
    }
}

/* Energy 1/2 m . v on nl lanes (for checks): e[l]. */
void vp_energy(int64_t n, const double *restrict par, const double *restrict x,
               double *restrict work, double *restrict e, int64_t nl, int64_t ld) {
    /* work: 2n * ld doubles for the right-hand side; m . v is read back from
     * mdot = -(m . v) gamma: m . v = -(mdot . gamma) / r2 */
    vp_rhs(n, par, x, work, nl, ld);
    for (int64_t l = 0; l < nl; ++l) {
        double r2 = 0.0, dg = 0.0;
        for (int64_t k = 0; k < n; ++k) {
            const double g = x[k * ld + l];
            r2 += g * g;
            dg += work[(n + k) * ld + l] * g;
        }
        e[l] = -0.5 * dg / r2;
    }
}

typedef struct {
    int64_t n;
} vp_ctx;

/* The same right-hand side behind nhfast's kernel ABI (n through ctx, j through par). */
int vp_rhs_abi(void *ctx, const double *t, const double *x, const double *par, double *out,
               int64_t nl, int64_t ld) {
    (void)t;
    vp_rhs(((const vp_ctx *)ctx)->n, par, x, out, nl, ld);
    return 0;
}

typedef int (*vp_kernel_fn)(void *, const double *, const double *, const double *, double *,
                            int64_t, int64_t);

/* Call any kernel of nhfast's ABI `reps` times on the same lanes (the timing harness used for
 * both the hand-written and the generated kernel). Returns the sum of the return codes. */
int64_t vp_repeat_kernel(vp_kernel_fn fn, void *ctx, const double *t, const double *x,
                         const double *par, double *out, int64_t nl, int64_t ld, int64_t reps) {
    int64_t rc = 0;
    for (int64_t r = 0; r < reps; ++r) rc += fn(ctx, t, x, par, out, nl, ld);
    return rc;
}
