/*
 * nhfast linalg.h: small dense solves for generated kernels, over a block of lanes.
 *
 * Included by every kernel library that needs it (shipped in nhfast/codegen/include/; its
 * bytes enter the kernel cache key). Matrices are stored per entry in
 * struct-of-arrays form: entry (i, j) of lane l of an r x r matrix at A[(i*r + j)*L + l],
 * vectors at b[i*L + l]. A lane whose matrix is not positive definite (Cholesky) or is
 * singular (LU) gets NaN in its solution, which the integrators report per lane.
 */
#ifndef NH_LINALG_H
#define NH_LINALG_H

#include <math.h>
#include <stdint.h>

/* In-place Cholesky factorisation A = L L^T (lower triangle of A is overwritten by L; the
 * diagonal holds 1/L_jj). Lanes innermost. */
static void nh_chol_factor(int64_t r, int64_t L, double *A) {
    for (int64_t j = 0; j < r; ++j) {
        double *ajj = A + (j * r + j) * L;
        for (int64_t k = 0; k < j; ++k) {
            const double *ajk = A + (j * r + k) * L;
            for (int64_t l = 0; l < L; ++l) ajj[l] -= ajk[l] * ajk[l];
        }
        for (int64_t l = 0; l < L; ++l) ajj[l] = ajj[l] > 0.0 ? 1.0 / sqrt(ajj[l]) : NAN;
        for (int64_t i = j + 1; i < r; ++i) {
            double *aij = A + (i * r + j) * L;
            for (int64_t k = 0; k < j; ++k) {
                const double *aik = A + (i * r + k) * L, *ajk = A + (j * r + k) * L;
                for (int64_t l = 0; l < L; ++l) aij[l] -= aik[l] * ajk[l];
            }
            for (int64_t l = 0; l < L; ++l) aij[l] *= ajj[l];
        }
    }
}

/* Solve L L^T x = b in place (b becomes x), with the factor from nh_chol_factor. */
static void nh_chol_solve(int64_t r, int64_t L, const double *A, double *b) {
    for (int64_t i = 0; i < r; ++i) {
        double *bi = b + i * L;
        for (int64_t k = 0; k < i; ++k) {
            const double *aik = A + (i * r + k) * L, *bk = b + k * L;
            for (int64_t l = 0; l < L; ++l) bi[l] -= aik[l] * bk[l];
        }
        const double *aii = A + (i * r + i) * L;
        for (int64_t l = 0; l < L; ++l) bi[l] *= aii[l];
    }
    for (int64_t i = r - 1; i >= 0; --i) {
        double *bi = b + i * L;
        for (int64_t k = i + 1; k < r; ++k) {
            const double *aki = A + (k * r + i) * L, *bk = b + k * L;
            for (int64_t l = 0; l < L; ++l) bi[l] -= aki[l] * bk[l];
        }
        const double *aii = A + (i * r + i) * L;
        for (int64_t l = 0; l < L; ++l) bi[l] *= aii[l];
    }
}

/* In-place LU factorisation with partial pivoting, lane by lane; piv[i*L + l] is the row
 * swapped with row i. A singular pivot makes the lane's factor NaN. */
static void nh_lu_factor(int64_t r, int64_t L, double *A, int64_t *piv) {
    for (int64_t l = 0; l < L; ++l) {
        for (int64_t j = 0; j < r; ++j) {
            int64_t p = j;
            double best = fabs(A[(j * r + j) * L + l]);
            for (int64_t i = j + 1; i < r; ++i) {
                const double v = fabs(A[(i * r + j) * L + l]);
                if (v > best) {
                    best = v;
                    p = i;
                }
            }
            piv[j * L + l] = p;
            if (p != j)
                for (int64_t k = 0; k < r; ++k) {
                    const double t = A[(j * r + k) * L + l];
                    A[(j * r + k) * L + l] = A[(p * r + k) * L + l];
                    A[(p * r + k) * L + l] = t;
                }
            const double d = A[(j * r + j) * L + l];
            const double inv = d != 0.0 ? 1.0 / d : NAN;
            if (d == 0.0) A[(j * r + j) * L + l] = NAN; /* singular: the solve gives NaN */
            for (int64_t i = j + 1; i < r; ++i) {
                const double f = A[(i * r + j) * L + l] * inv;
                A[(i * r + j) * L + l] = f;
                for (int64_t k = j + 1; k < r; ++k) A[(i * r + k) * L + l] -= f * A[(j * r + k) * L + l];
            }
        }
    }
}

/* Solve with the factor from nh_lu_factor, in place. */
static void nh_lu_solve(int64_t r, int64_t L, const double *A, const int64_t *piv, double *b) {
    for (int64_t l = 0; l < L; ++l) {
        for (int64_t i = 0; i < r; ++i) {
            const int64_t p = piv[i * L + l];
            if (p != i) {
                const double t = b[i * L + l];
                b[i * L + l] = b[p * L + l];
                b[p * L + l] = t;
            }
        }
        for (int64_t i = 0; i < r; ++i) {
            double s = b[i * L + l];
            for (int64_t k = 0; k < i; ++k) s -= A[(i * r + k) * L + l] * b[k * L + l];
            b[i * L + l] = s;
        }
        for (int64_t i = r - 1; i >= 0; --i) {
            double s = b[i * L + l];
            for (int64_t k = i + 1; k < r; ++k) s -= A[(i * r + k) * L + l] * b[k * L + l];
            b[i * L + l] = s / A[(i * r + i) * L + l];
        }
    }
}

#endif /* NH_LINALG_H */
