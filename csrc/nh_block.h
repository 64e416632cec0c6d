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

struct nh_block {
    const nh_system *sys;
    const nh_options *opt;
    const double *t_eval;
    int64_t nt;
    int64_t n;      /* state dimension */
    int64_t nl;     /* lanes in this block (also the SoA stride) */
    int64_t lane0;  /* global index of lane 0 */
    double *par;    /* [npar][nl] */
    double *x;      /* [n][nl] current state */
    double *tl;     /* [nl] current time per lane */
    int64_t *kout;  /* [nl] index of the next output time */
    unsigned char *active; /* [nl] 1 while the lane still integrates */
    double *y;      /* global outputs [ntraj][nt][n] */
    int32_t *status; /* global */
    int64_t *stats;  /* global [ntraj][NH_NSTATS] */
};

static inline int64_t nh_count_active(const nh_block *b) {
    int64_t c = 0;
    for (int64_t l = 0; l < b->nl; ++l) c += b->active[l];
    return c;
}

static inline void nh_stat_add(nh_block *b, int64_t l, int k, int64_t v) {
    b->stats[(b->lane0 + l) * NH_NSTATS + k] += v;
}

/* Evaluate the vector field on the block; counts one evaluation for each active lane. */
static inline int nh_rhs(nh_block *b, const double *t, const double *x, double *out) {
    int rc = b->sys->rhs(b->sys->ctx, t, x, b->par, out, b->nl, b->nl);
    for (int64_t l = 0; l < b->nl; ++l)
        if (b->active[l]) nh_stat_add(b, l, NH_STAT_RHS, 1);
    return rc;
}

/* Write the current state of lane l as output row k. */
static inline void nh_store(nh_block *b, int64_t l, int64_t k) {
    double *row = b->y + ((b->lane0 + l) * b->nt + k) * b->n;
    for (int64_t i = 0; i < b->n; ++i) row[i] = b->x[i * b->nl + l];
}

/* Stop lane l with a status code; its outputs from row kout on become NaN. */
static inline void nh_fail(nh_block *b, int64_t l, int32_t code) {
    b->active[l] = 0;
    b->status[b->lane0 + l] = code;
    for (int64_t k = b->kout[l]; k < b->nt; ++k) {
        double *row = b->y + ((b->lane0 + l) * b->nt + k) * b->n;
        for (int64_t i = 0; i < b->n; ++i) row[i] = NAN;
    }
    b->kout[l] = b->nt;
}

/* fin[l] = 1 if every component of v (SoA, m components) is finite in lane l. */
static inline void nh_finite_lanes(const double *v, int64_t m, int64_t nl, unsigned char *fin) {
    for (int64_t l = 0; l < nl; ++l) fin[l] = 1;
    for (int64_t i = 0; i < m; ++i)
        for (int64_t l = 0; l < nl; ++l) fin[l] &= (unsigned char)isfinite(v[i * nl + l]);
}

/*
 * One fixed step of size h from time t for every lane of the block: writes the increment
 * dx (SoA [n][nl]) and sets ok[l] = 0 for lanes whose stage equations did not converge.
 * `work` holds nh_fixed_work(method, n, nl) doubles; `state` persists across steps
 * (first-same-as-last data), reset by setting *fresh = 1.
 */
int64_t nh_fixed_work(int method, int64_t n, int64_t nl);
int nh_rk4_step(nh_block *b, double t, double h, double *work, double *dx);
int nh_leapfrog_step(nh_block *b, double t, double h, double *work, double *dx, int *fresh);
int nh_gauss_step(nh_block *b, int stages, double t, double h, double *work, double *dx,
                  unsigned char *ok);

#endif /* NH_BLOCK_H */
