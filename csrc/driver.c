/* Block driver: loads lanes into struct-of-arrays form, dispatches to a scheme, and
 * evaluates kernels over row-major data (observables, companions). */
#include "nh_block.h"

int nh_stop_requested(nh_interrupt *s) { return nh_check_stop(s); }

void nh_request_stop(nh_interrupt *s) {
    if (s) nh_set_flag(&s->flag);
}

int64_t nh_atomic_add(int64_t *p, int64_t v) { return nh_fetch_add(p, v); }

int64_t nh_atomic_get(int64_t *p) { return nh_load(p); }

/* After a stop: the block's unfinished trajectories, and those still waiting in its queue,
 * end with status NH_LANE_INTERRUPTED and NaN outputs from their first unreached time on. */
static void interrupt_block(nh_block *b) {
    for (int64_t l = 0; l < b->nl; ++l)
        if (b->active[l]) nh_fail(b, l, NH_LANE_INTERRUPTED);
    for (int64_t g = nh_take(b); g >= 0; g = nh_take(b)) {
        b->status[g] = NH_LANE_INTERRUPTED;
        for (int64_t i = 0; i < b->nt * b->n; ++i) b->y[g * b->nt * b->n + i] = NAN;
        for (int k = 0; k < NH_NSTATS; ++k) b->stats[g * NH_NSTATS + k] = 0;
        if (b->t_end) b->t_end[g] = b->t_eval[0];
        if (b->x_end)
            for (int64_t i = 0; i < b->n; ++i) b->x_end[g * b->n + i] = b->x0[g * b->n + i];
    }
}

int nh_integrate_block(const nh_system *sys, const nh_options *opt, const double *t_eval,
                       int64_t nt, const double *x0, const double *par, int64_t par_stride,
                       int64_t lane0, int64_t count, int64_t width, double *y, int32_t *status,
                       int64_t *stats, double *t_end, int64_t *shared_next) {
    return nh_integrate_block_ex(sys, opt, t_eval, nt, x0, par, par_stride, lane0, count, width,
                                 y, status, stats, t_end, shared_next, 0, NULL, NULL);
}

/* Lane slots of a block: at most `width`, and few enough that the scheme's block-wide work,
 * `work` doubles per slot, stays within NH_BLOCK_BYTES (in the second-level cache: every
 * step writes it and reads it back), but one chunk at least. Results do not depend on it.
 * Narrower blocks measured faster than blocks of 64 for large systems, DOP853 and Taylor
 * alike; systems of a few states keep 64, which is faster there (see benchmarks/NOTES.md). */
#define NH_BLOCK_BYTES (64 * 1024)
static int64_t nh_block_width(int64_t work, int64_t width) {
    const double fit = floor((double)NH_BLOCK_BYTES / ((double)work * sizeof(double)) / NH_CHUNK);
    const int64_t most = fit < 1.0 ? NH_CHUNK : (int64_t)NH_MIN(fit, 1e9) * NH_CHUNK;
    return width < most ? width : most;
}

int nh_integrate_block_ex(const nh_system *sys, const nh_options *opt, const double *t_eval,
                          int64_t nt, const double *x0, const double *par, int64_t par_stride,
                          int64_t lane0, int64_t count, int64_t width, double *y,
                          int32_t *status, int64_t *stats, double *t_end, int64_t *shared_next,
                          int dense, const nh_events *ev, double *x_end) {
    if (!sys || !opt || !t_eval || !x0 || !y || !status || !stats) return NH_ERR_ARG;
    const int taylor = opt->method == NH_TAYLOR;
    if (taylor ? !sys->taylor : !sys->rhs) return NH_ERR_ARG;
    if (opt->order < 0 || opt->order > NH_TAYLOR_MAX_ORDER) return NH_ERR_ARG;
    if (count <= 0 || width <= 0 || nt < 1 || sys->n <= 0 || sys->npar < 0 || lane0 < 0 ||
        par_stride < 0 || count > INT64_MAX - lane0)
        return NH_ERR_SIZE;
    if (sys->npar > 0 && !par) return NH_ERR_ARG;
    if (sys->nderived < 0 || (sys->derive ? sys->nderived < 1 : sys->nderived != 0))
        return NH_ERR_ARG;
    if (opt->method < 0 || opt->method >= NH_N_METHODS || opt->max_steps < 1 || opt->max_iter < 1 ||
        opt->nstiff < 0)
        return NH_ERR_ARG;
    /* Taylor: outputs always from the series, dense 0 and 1 alike; events need no dense */
    if (dense != 0 && (dense != 1 || (opt->method != NH_DOP853 && !taylor))) return NH_ERR_ARG;
    if (ev && ((!dense && !taylor) || !ev->fn || ev->nev < 1 || ev->cap < 1 || !ev->direction ||
               !ev->terminal || !ev->t || !ev->which || !ev->y || !ev->count))
        return NH_ERR_ARG;
    if (opt->method == NH_LEAPFROG && (sys->split <= 0 || sys->split >= sys->n)) return NH_ERR_ARG;

    const int64_t n = sys->n;
    const int adaptive = (NH_ADAPTIVE_MASK >> opt->method) & 1;
    width = nh_block_width(taylor     ? nh_taylor_work(opt, n)
                           : adaptive ? nh_adaptive_work(opt->method, n, dense)
                                      : nh_fixed_work(opt->method, n, 1),
                           width);
    const int64_t w = count < width ? count : width;
    if (w > NH_MAX_ELEMS) return NH_ERR_SIZE;
    const int64_t nl = (w + NH_CHUNK - 1) / NH_CHUNK * NH_CHUNK;
    if (sys->nderived > NH_MAX_ELEMS - sys->npar) return NH_ERR_SIZE;
    const int64_t npar_all = sys->npar + sys->nderived; /* rows of the block's parameters */
    if (!nh_fits(n, nl) || !nh_fits(npar_all, nl) || !nh_fits(NH_NSTATS, nl)) return NH_ERR_SIZE;
    if (ev && !nh_fits(ev->nev, nl)) return NH_ERR_SIZE;
    static const double no_par = 0.0;
    nh_block b;
    b.sys = sys;
    b.opt = opt;
    b.t_eval = t_eval;
    b.nt = nt;
    b.n = n;
    b.nl = nl;
    b.nw = w;
    b.next = lane0;
    b.end = lane0 + count;
    b.shared = shared_next;
    b.x0 = x0;
    b.par_in = par ? par : &no_par;
    b.par_stride = par_stride;
    b.y = y;
    b.status = status;
    b.stats = stats;
    b.t_end = t_end;
    b.x_end = x_end;
    b.err = NH_OK;
    b.poll_tick = 0;
    /* the block's arrays in one zeroed allocation (eight of them measurably slowed a
     * one-step call): 8-byte entries first, the bytes of `active` last */
    const size_t npw = (size_t)(npar_all > 0 ? npar_all * nl : 1);
    const size_t words = npw + (size_t)(n * nl) + 4 * (size_t)nl + (size_t)(NH_NSTATS * nl);
    double *mem = (double *)calloc(words + (size_t)(nl + 7) / 8, sizeof(double));
    b.par = mem;
    b.x = mem ? b.par + npw : NULL;
    b.tl = mem ? b.x + n * nl : NULL;
    b.kout = mem ? (int64_t *)(b.tl + nl) : NULL;
    b.gid = mem ? b.kout + nl : NULL;
    b.call0 = mem ? b.gid + nl : NULL;
    b.cnt = mem ? b.call0 + nl : NULL;
    b.active = mem ? (unsigned char *)(mem + words) : NULL;
    b.ncalls = 0;
    b.dense = dense;
    b.ev = ev;
    int rc = NH_OK;
    if (!mem) {
        rc = NH_ERR_NOMEM;
        goto done;
    }
    /* Idle slots hold a copy of the first trajectory so that kernels see finite inputs. */
    for (int64_t l = 0; l < nl; ++l) {
        for (int64_t i = 0; i < n; ++i) b.x[i * nl + l] = x0[lane0 * n + i];
        for (int64_t k = 0; k < sys->npar; ++k) b.par[k * nl + l] = b.par_in[lane0 * par_stride + k];
        b.tl[l] = t_eval[0];
        b.kout[l] = nt;
        b.gid[l] = -1;
        b.active[l] = 0;
    }
    nh_derive_block(&b);
    if (taylor) {
        rc = nh_run_taylor(&b);
    } else if ((NH_ADAPTIVE_MASK >> opt->method) & 1) {
        rc = nh_run_adaptive(&b);
    } else {
        unsigned char *fresh = (unsigned char *)malloc((size_t)nl);
        if (!fresh) {
            rc = NH_ERR_NOMEM;
            goto done;
        }
        while (rc == NH_OK && nh_pending(&b)) {
            if (nh_stopping(&b)) {
                rc = NH_ERR_INTERRUPTED;
                break;
            }
            nh_refill(&b, fresh);
            rc = nh_run_fixed(&b);
        }
        free(fresh);
    }
    if (b.err != NH_OK)
        rc = b.err;
    else if (rc == NH_ERR_INTERRUPTED)
        interrupt_block(&b);
done:
    free(mem);
    return rc;
}

int nh_eval_rows(nh_kernel_fn fn, void *ctx, int64_t nin, int64_t nout, int64_t npar,
                 const double *t, const double *x, const double *par, int64_t par_stride,
                 int64_t rows_per_par, int64_t row0, int64_t nrows, double *out, int64_t block,
                 nh_interrupt *stop) {
    if (!fn || !t || !x || !out) return NH_ERR_ARG;
    if (nin <= 0 || nout < 0 || npar < 0 || nrows < 0 || row0 < 0 || block <= 0 ||
        rows_per_par <= 0 || par_stride < 0 || nrows > INT64_MAX - row0)
        return NH_ERR_SIZE;
    if (npar > 0 && !par) return NH_ERR_ARG;
    if (nrows == 0 || nout == 0) return NH_OK;
    const int64_t B = nrows < block ? nrows : block;
    if (!nh_fits(nin, B) || !nh_fits(nout, B) || !nh_fits(npar, B)) return NH_ERR_SIZE;
    double *xb = (double *)malloc(sizeof(double) * (size_t)(nin * B));
    double *pb = (double *)malloc(sizeof(double) * (size_t)(npar > 0 ? npar * B : 1));
    double *tb = (double *)malloc(sizeof(double) * (size_t)B);
    double *ob = (double *)malloc(sizeof(double) * (size_t)(nout * B));
    int rc = NH_OK;
    if (!xb || !pb || !tb || !ob) {
        rc = NH_ERR_NOMEM;
        goto done;
    }
    for (int64_t r0 = row0; r0 < row0 + nrows && rc == NH_OK; r0 += B) {
        if (nh_check_stop(stop)) {
            rc = NH_ERR_INTERRUPTED;
            break;
        }
        const int64_t m = (row0 + nrows - r0) < B ? (row0 + nrows - r0) : B;
        for (int64_t l = 0; l < m; ++l) {
            const int64_t r = r0 + l;
            tb[l] = t[r];
            for (int64_t i = 0; i < nin; ++i) xb[i * m + l] = x[r * nin + i];
            if (npar > 0) {
                const double *pr = par + (r / rows_per_par) * par_stride;
                for (int64_t k = 0; k < npar; ++k) pb[k * m + l] = pr[k];
            }
        }
        rc = fn(ctx, tb, xb, pb, ob, m, m);
        for (int64_t l = 0; l < m && rc == NH_OK; ++l)
            for (int64_t j = 0; j < nout; ++j) out[(r0 + l) * nout + j] = ob[j * m + l];
    }
done:
    free(xb);
    free(pb);
    free(tb);
    free(ob);
    return rc;
}
