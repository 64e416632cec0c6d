/*
 * nhfast numeric core: batch integrators over blocks of lanes (plain C99, no Python.h).
 *
 * The Cython layer calls nh_integrate_block once per thread, each call with its own block of
 * lane slots; the calls draw the batch's trajectories from one shared counter (a slot whose
 * trajectory finishes takes the next one). A trajectory's arithmetic never involves another
 * lane, so results do not depend on the number of threads or on which slot ran it.
 */
#ifndef NH_CORE_H
#define NH_CORE_H

#include <stdint.h>
#include "nh_abi.h"

enum nh_method {
    NH_RK4 = 0,
    NH_DOPRI5 = 1,
    NH_DOP853 = 2,
    NH_LEAPFROG = 3,
    NH_MIDPOINT = 4,
    NH_GAUSS4 = 5,
    NH_GAUSS6 = 6,
    NH_TAYLOR = 7, /* adaptive Taylor series (taylor.c), needs nh_system.taylor */
    NH_N_METHODS = 8
};

/* Bit (1 << method) is set for the adaptive (error-controlled) methods. */
#define NH_ADAPTIVE_MASK ((1 << NH_DOPRI5) | (1 << NH_DOP853) | (1 << NH_TAYLOR))

/* Columns of the per-lane statistics array stats[lane*NH_NSTATS + k]. */
#define NH_STAT_STEPS 0     /* accepted steps */
#define NH_STAT_RHS 1       /* right-hand-side evaluations */
#define NH_STAT_REJECTED 2  /* rejected steps (adaptive) */
#define NH_STAT_ITER 3      /* stage iterations (implicit) */
#define NH_NSTATS 4

/* A run stopped on request (see nh_interrupt): the per-lane status of every trajectory that
 * did not finish (its outputs from the first unreached time on are NaN), and the return code
 * of nh_integrate_block / nh_eval_rows. Core codes, not part of the kernel ABI. */
#define NH_LANE_INTERRUPTED 5
#define NH_ERR_INTERRUPTED (-5)

/* An adaptive explicit pair stopped a trajectory that became stiff: Hairer's test on the last
 * stage difference (DOP853/DOPRI5 codes, Solving ODEs II, IV.2) estimates h*|lambda| as
 *   h * |f(t+h, y1) - f(t+h, Y_last)| / |y1 - Y_last|     (Y_last: the last stage, c = 1)
 * after accepted steps; NH_STIFF_POSITIVES estimates above the pair's stability bound
 * (NH_STIFF_BOUND_DOP853 6.1, NH_STIFF_BOUND_DOPRI5 3.25) declare the trajectory stiff, and
 * NH_STIFF_RESET consecutive ones below reset the count. The test runs after every
 * nstiff-th accepted step, and after every step once an estimate was above the bound.
 * Core code, not part of the kernel ABI. */
#define NH_LANE_STIFF 6
#define NH_STIFF_POSITIVES 15
#define NH_STIFF_RESET 6

/* A trajectory left its chart's domain: one of the system's conditions expr > 0 fell through
 * zero (an internal terminal event added by nhfast.integrate, which sets this status; the
 * core itself never does). Core code, not part of the kernel ABI. */
#define NH_LANE_LEFT_DOMAIN 7

/*
 * Cooperative stop of a run. Every thread working on the run checks it between steps (and
 * between lane blocks): `poll`, when set, is asked first (any thread may call it; a nonzero
 * return requests the stop), then the flag is read. Once the flag is set every block finishes
 * the step it is in and returns NH_ERR_INTERRUPTED. The flag is read and written atomically.
 */
typedef struct nh_interrupt {
    int flag;                 /* nonzero once a stop was requested */
    int (*poll)(void *ctx);   /* NULL, or a hook asked between steps; nonzero: stop */
    void *ctx;                /* handed to poll unchanged */
} nh_interrupt;

/* Whether a stop was requested (polls first); `s` may be NULL (never stops). */
int nh_stop_requested(nh_interrupt *s);
/* Request a stop: every thread leaves after its current step. */
void nh_request_stop(nh_interrupt *s);
/* Atomic fetch-and-add and load of a counter shared by threads. */
int64_t nh_atomic_add(int64_t *p, int64_t v);
int64_t nh_atomic_get(int64_t *p);

typedef struct {
    nh_kernel_fn rhs; /* vector field kernel (may be NULL for NH_TAYLOR) */
    nh_taylor_fn taylor; /* NH_TAYLOR: Taylor coefficients kernel (same ctx); else NULL */
    void *ctx;        /* handed to the kernel unchanged */
    int64_t n;        /* state dimension */
    int64_t npar;     /* number of parameters */
    int64_t split;    /* leapfrog: the first `split` components are the positions */
    nh_kernel_fn derive; /* NULL, or the library's nh_derive: rhs is then its nh_rhs_derived,
                            reading npar + nderived parameter rows (nh_abi.h) */
    int64_t nderived; /* number of derived parameters (0 without derive) */
} nh_system;

typedef struct {
    int method;        /* enum nh_method */
    double rtol, atol; /* adaptive error control */
    double h;          /* fixed-step size; adaptive: initial step (0: automatic); Taylor:
                          a fixed step size (0: adaptive) */
    double hmax;       /* adaptive: largest |h| (0: unbounded) */
    int64_t max_steps; /* per lane: accepted + rejected steps */
    double tol;        /* implicit schemes: stage-iteration tolerance (relative to 1+|x|) */
    int64_t max_iter;  /* implicit schemes: iteration cap per step */
    nh_interrupt *stop; /* NULL, or checked between steps: see nh_interrupt */
    int64_t nstiff;    /* adaptive: stiffness test from every nstiff-th accepted step (see
                          NH_LANE_STIFF); 0: no test */
    int64_t order;     /* NH_TAYLOR: order of the series, 0: from the tolerance (taylor.c) */
    int64_t order_auto; /* NH_TAYLOR with order 0: the order to run at instead of the
                           tolerance's p0 (0: p0), with p0's accuracy (taylor.c, nh_run_taylor);
                           nhfast picks it from the kernel's cost */
} nh_options;

/*
 * Integrate trajectories [lane0, lane0 + count) of a batch through min(width, count) lane
 * slots (the kernels run on exactly these; only the SoA stride is rounded up to a multiple of
 * 8); a slot whose trajectory finishes takes the next one.
 *   t_eval : nt output times, strictly monotonic; t_eval[0] is the initial time
 *   x0     : initial states, row-major [ntraj][n]
 *   par    : parameters, row p of lane l at par[l*par_stride]; par_stride = 0 broadcasts
 *   y      : outputs, row-major [ntraj][nt][n]; rows after a lane fails are NaN
 *   status : per-lane NH_LANE_* code
 *   stats  : per-lane counters [ntraj][NH_NSTATS]
 *   t_end  : NULL, or per-lane time reached [ntraj]: the final output time of a finished
 *            trajectory; after a failure, adaptive methods: the time of the last accepted
 *            step, fixed-step methods: the last output time reached
 *   shared_next : NULL, or a counter shared by concurrent calls on the same batch (initially
 *            lane0): slots then take the batch's next trajectory from it, whichever call
 *            (thread) they belong to; results do not change, only the scheduling
 * Returns NH_OK, NH_ERR_INTERRUPTED (opt->stop was requested: the trajectories this call
 * had not finished, and those still waiting in the queue it drew from, have status
 * NH_LANE_INTERRUPTED), or another negative NH_ERR_* code (a kernel failed, memory ran out,
 * or the sizes are inconsistent or too large to address).
 */
int nh_integrate_block(const nh_system *sys, const nh_options *opt, const double *t_eval,
                       int64_t nt, const double *x0, const double *par, int64_t par_stride,
                       int64_t lane0, int64_t count, int64_t width, double *y, int32_t *status,
                       int64_t *stats, double *t_end, int64_t *shared_next);

/*
 * Evaluate a kernel on rows [row0, row0 + nrows) of row-major inputs:
 *   x[r][nin], t[r], parameters of row r at par[(r / rows_per_par) * par_stride],
 *   out[r][nout]. Rows are gathered into lane blocks of at most `block` lanes; `stop` (or
 *   NULL) is checked between blocks (NH_ERR_INTERRUPTED: later rows are not written).
 */
int nh_eval_rows(nh_kernel_fn fn, void *ctx, int64_t nin, int64_t nout, int64_t npar,
                 const double *t, const double *x, const double *par, int64_t par_stride,
                 int64_t rows_per_par, int64_t row0, int64_t nrows, double *out, int64_t block,
                 nh_interrupt *stop);

/* Method implementations (rk.c, symplectic.c): advance a block already loaded in SoA form. */
typedef struct nh_block nh_block;
int nh_run_adaptive(nh_block *b);
int nh_run_fixed(nh_block *b);
int nh_run_taylor(nh_block *b);
/* The order p0 of the tolerance: `order` if positive, else from min(rtol, atol) (taylor.c). A
 * run takes opt->order_auto instead when it is positive (nhfast's front end compiles the
 * kernel for the order a run takes). */
int64_t nh_taylor_order(int64_t order, double rtol, double atol);
/* Doubles per lane slot of a scheme's block-wide work (see nh_block_width in driver.c). */
int64_t nh_taylor_work(const nh_options *o, int64_t n);
int64_t nh_adaptive_work(int method, int64_t n, int dense);

#endif /* NH_CORE_H */
