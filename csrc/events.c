/* Event location shared by the schemes with a dense output (DOP853's continuous extension,
 * the Taylor series): sign changes of g over accepted steps, located to round-off by
 * bracketing (Illinois / bisection) iterations in lockstep over lanes. */
#include "nh_block.h"

int nh_ev_alloc(nh_ev_work *w, const nh_events *ev, int64_t n, int64_t nl) {
    memset(w, 0, sizeof *w);
    if (!ev) return NH_OK;
    const int64_t nev = ev->nev;
    /* g0, g1, gt, root ([nev][nl] each), 7 nl, xe; 4 nl flags */
    w->dbuf = (double *)calloc((size_t)(4 * nev * nl + 7 * nl + n * nl), sizeof(double));
    w->fbuf = (unsigned char *)calloc((size_t)(4 * nl), 1);
    if (!w->dbuf || !w->fbuf) {
        nh_ev_free(w);
        return NH_ERR_NOMEM;
    }
    w->g0 = w->dbuf;
    w->g1 = w->g0 + nev * nl;
    w->gt = w->g1 + nev * nl;
    w->root = w->gt + nev * nl;
    w->a = w->root + nev * nl;
    w->bb = w->a + nl;
    w->fa = w->bb + nl;
    w->fb = w->fa + nl;
    w->th = w->fb + nl;
    w->te = w->th + nl;
    w->tstop = w->te + nl;
    w->xe = w->tstop + nl;
    w->srch = w->fbuf;
    w->cross = w->fbuf + nl;
    w->stop = w->fbuf + 2 * nl;
    w->side = (signed char *)(w->fbuf + 3 * nl);
    return NH_OK;
}

void nh_ev_free(nh_ev_work *w) {
    free(w->dbuf);
    free(w->fbuf);
    memset(w, 0, sizeof *w);
}

/* Bracket [a, bb] in theta, Illinois steps with a bisection every third iteration (only
 * bisection next to a NaN end), until the bracket is a few ulps of t wide; the root is the end
 * past the crossing. NaN counts as below zero (nh_ev_below): the edge of a NaN stretch is
 * located like a root. */
int nh_ev_locate(nh_block *b, const nh_events *ev, nh_dense_fn dense, const void *dctx,
                 const double *hu, const double *told, const double *xn, nh_ev_work *w) {
    const int64_t n = b->n, nl = b->nl, nev = ev->nev;
    const double eps = 2.220446049250313e-16;
    memcpy(w->xe, xn, sizeof(double) * (size_t)(n * nl));
    for (int64_t l = 0; l < nl; ++l) w->te[l] = b->tl[l];
    for (int64_t j = 0; j < nev; ++j) {
        double *g0 = w->g0 + j * nl, *g1 = w->g1 + j * nl, *root = w->root + j * nl;
        int64_t ns = 0;
        for (int64_t l = 0; l < nl; ++l) {
            root[l] = NAN;
            w->srch[l] = (unsigned char)(w->cross[l] && nh_ev_crossing(g0[l], g1[l], ev->direction[j]));
            if (!w->srch[l]) continue;
            w->a[l] = 0.0;
            w->bb[l] = 1.0;
            w->fa[l] = g0[l];
            w->fb[l] = g1[l];
            w->side[l] = 0;
            ++ns;
        }
        for (int it = 0; ns > 0; ++it) {
            for (int64_t l = 0; l < nl; ++l) {
                if (!w->srch[l]) continue;
                const double a = w->a[l], c = w->bb[l];
                double th = 0.5 * (a + c);
                /* a secant step needs two finite ends (NaN: bisection to the NaN edge) */
                if (it % 3 != 2 && w->fb[l] != w->fa[l] && isfinite(w->fa[l]) &&
                    isfinite(w->fb[l])) {
                    const double s = (a * w->fb[l] - c * w->fa[l]) / (w->fb[l] - w->fa[l]);
                    if (s > a && s < c) th = s;
                }
                w->th[l] = th;
                w->te[l] = told[l] + th * hu[l];
                dense(b, dctx, l, th, w->xe + l, nl);
            }
            const int rc = ev->fn(ev->ctx, w->te, w->xe, b->par, w->gt, b->nw, nl);
            if (rc != NH_OK) return rc;
            for (int64_t l = 0; l < nl; ++l) {
                if (!w->srch[l]) continue;
                const double f = w->gt[j * nl + l], th = w->th[l];
                if (f == 0.0 || isinf(f)) {
                    w->a[l] = w->bb[l] = th;
                } else if (nh_ev_below(f) == nh_ev_below(w->fa[l])) {
                    w->a[l] = th;
                    w->fa[l] = f;
                    if (w->side[l] == -1) w->fb[l] *= 0.5;
                    w->side[l] = -1;
                } else {
                    w->bb[l] = th;
                    w->fb[l] = f;
                    if (w->side[l] == 1) w->fa[l] *= 0.5;
                    w->side[l] = 1;
                }
                const double tsc = NH_MAX(fabs(told[l]), fabs(told[l] + hu[l]));
                if ((w->bb[l] - w->a[l]) * fabs(hu[l]) <= 4.0 * eps * tsc ||
                    w->bb[l] - w->a[l] <= 4.0 * eps || it >= 300) {
                    root[l] = w->bb[l];
                    w->srch[l] = 0;
                    --ns;
                }
            }
        }
    }
    /* records in time order (ties: lower index first), up to the first terminal event */
    for (int64_t l = 0; l < nl; ++l) {
        w->stop[l] = 0;
        if (!w->cross[l]) continue;
        const int64_t g = b->gid[l];
        double lt = -1.0;
        int64_t lj = -1;
        for (;;) {
            int64_t jb = -1;
            double tb = 0.0;
            for (int64_t j = 0; j < nev; ++j) {
                const double r = w->root[j * nl + l];
                if (!(r >= 0.0)) continue; /* NaN: none */
                if (r < lt || (r == lt && j <= lj)) continue;
                if (jb < 0 || r < tb) {
                    jb = j;
                    tb = r;
                }
            }
            if (jb < 0) break;
            lt = tb;
            lj = jb;
            const double te = tb == 1.0 ? b->tl[l] : told[l] + tb * hu[l];
            const int64_t c = ev->count[g];
            if (c < ev->cap) {
                ev->t[g * ev->cap + c] = te;
                ev->which[g * ev->cap + c] = (int32_t)jb;
                dense(b, dctx, l, tb, ev->y + (g * ev->cap + c) * n, 1);
            }
            ev->count[g] = c + 1;
            if (ev->terminal[jb]) {
                w->stop[l] = 1;
                w->tstop[l] = te;
                break;
            }
        }
    }
    return NH_OK;
}
