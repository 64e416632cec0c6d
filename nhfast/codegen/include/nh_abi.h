/*
 * nhfast kernel ABI: the seam between generated per-system kernels and the precompiled core.
 *
 * Plain C99; never includes Python.h. The one definition of the ABI: the core (csrc/) and
 * every generated kernel library include this header (it ships in nhfast/codegen/include/,
 * and its bytes enter the kernel cache key); the compiled module nhfast._core exports every
 * constant below to Python (nhfast._abi). Kernel libraries export functions of the types
 * below; the core (rk.c, symplectic.c) calls them through function pointers handed over in
 * signature-named capsules.
 *
 * Layout: a block of `nlanes` trajectories in struct-of-arrays form with lane stride `ld`
 * (ld >= nlanes): component i of lane l lives at x[i*ld + l], so inner loops run over lanes.
 *   t   : time of each lane,            t[l]
 *   x   : state,                        x[i*ld + l],  i < n_state
 *   par : parameters,                   par[k*ld + l], k < n_params
 *   out : kernel output,                out[j*ld + l], j < n_out of that kernel
 * Every kernel returns NH_OK or a negative NH_ERR_* code.
 */
#ifndef NH_ABI_H
#define NH_ABI_H

#include <stdint.h>

#define NH_ABI_VERSION 1

#if defined(_WIN32)
#define NH_EXPORT __declspec(dllexport)
#else
#define NH_EXPORT __attribute__((visibility("default")))
#endif

/* Kernel return codes (negative: the call itself failed). */
#define NH_OK 0
#define NH_ERR_SIZE (-1)     /* nlanes < 0 or ld < nlanes */
#define NH_ERR_NOMEM (-2)    /* a work buffer could not be allocated */
#define NH_ERR_CALLBACK (-3) /* a Python-side (NumPy backend) kernel raised */
#define NH_ERR_ARG (-4)      /* inconsistent arguments handed to the core */

/* Per-lane integration status (status[l]). */
#define NH_LANE_OK 0
#define NH_LANE_NONFINITE 1     /* the state or a stage became NaN/inf */
#define NH_LANE_STEP_UNDERFLOW 2 /* adaptive step size fell below the floor */
#define NH_LANE_MAX_STEPS 3     /* the step budget was used up */
#define NH_LANE_NOT_CONVERGED 4 /* the implicit stage equations did not converge */

/* Kernel function type: evaluates one generated output family on a block of lanes. */
typedef int (*nh_kernel_fn)(void *ctx, const double *t, const double *x, const double *par,
                            double *out, int64_t nlanes, int64_t ld);

/* Derived parameters (optional exports of a library). Sub-expressions of the parameters
 * alone (1/a_i, a constant mass matrix, ...) are lifted out of the right-hand side:
 *   int64_t nh_derived_count(void)      number nd >= 1 of derived parameters;
 *   nh_derive (an nh_kernel_fn)         out[j*ld + l] = derived parameter j of lane l, from
 *                                       par rows 0..n_params-1 (t and x unused);
 *   nh_rhs_derived (an nh_kernel_fn)    the vector field reading par rows 0..n_params+nd-1,
 *                                       rows n_params.. holding nh_derive's output.
 * nh_rhs keeps the plain contract (it derives, then calls nh_rhs_derived). An integrator
 * computes the derived rows once per trajectory and then calls nh_rhs_derived. */

/* Info function of a kernel library: returns a pointer to NH_INFO_LEN int64 entries. */
typedef const int64_t *(*nh_info_fn)(void);

/* Indices into the info array. */
#define NH_INFO_ABI 0     /* NH_ABI_VERSION the library was generated for */
#define NH_INFO_NSTATE 1  /* n_state */
#define NH_INFO_NPARAM 2  /* n_params */
#define NH_INFO_NOBS 3    /* number of scalar observables */
#define NH_INFO_FLAGS 4   /* bit mask of NH_HAS_* */
#define NH_INFO_NQ 5      /* number of positions q (Hamiltonian systems), else 0 */
#define NH_INFO_LEN 6

#define NH_HAS_RHS 1
#define NH_HAS_JAC 2
#define NH_HAS_DIV 4
#define NH_HAS_OBS 8
#define NH_HAS_DHDQ 16
#define NH_HAS_DHDP 32
#define NH_HAS_TAYLOR 64

/* Taylor kernel: normalised Taylor coefficients, to order `order`, of the solution through
 * (t[l], x[l]) for lanes l < nlanes (SoA, lane stride ld):
 *   coef[(k * n_state + i) * ld + l] = x_i^[k],   x_i(t + h) = sum_{k=0..order} x_i^[k] h^k,
 * x^[0] = x. 1 <= order <= NH_TAYLOR_MAX_ORDER (else NH_ERR_ARG); the kernel allocates its
 * own work (NH_ERR_NOMEM when it cannot). A Taylor library exports nh_info (flags
 * NH_HAS_TAYLOR, nobs = nq = 0) and nh_taylor. */
#define NH_TAYLOR_MAX_ORDER 100
typedef int (*nh_taylor_fn)(void *ctx, const double *t, const double *x, const double *par,
                            double *coef, int64_t order, int64_t nlanes, int64_t ld);

#endif /* NH_ABI_H */
