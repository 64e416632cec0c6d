# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
# cython: cdivision=True
"""Compiled core of nhfast: batch integrators and kernel evaluation over lanes.

Typed memoryviews only (no NumPy C API). Each public function checks sizes, releases the
GIL once, runs blocks of lanes over threads (OpenMP when the build has it) and turns C
status codes into Python exceptions. Kernels arrive as ``PyCapsule`` objects named after
their C signature (``"nh_kernel_fn"``). Every constant of the kernel ABI (``nh_abi.h``) and
of the core (``nh_core.h``) is exported from the C headers, for ``nhfast._abi``.
"""
from cpython.pycapsule cimport PyCapsule_GetPointer, PyCapsule_New, PyCapsule_IsValid
from libc.stdint cimport int32_t, int64_t
from cython.parallel cimport prange
from cython.view cimport array as cvarray

cdef extern from "nh_abi.h":
    int NH_ABI_VERSION
    int NH_OK
    int NH_ERR_SIZE
    int NH_ERR_NOMEM
    int NH_ERR_CALLBACK
    int NH_ERR_ARG
    int NH_LANE_OK
    int NH_LANE_NONFINITE
    int NH_LANE_STEP_UNDERFLOW
    int NH_LANE_MAX_STEPS
    int NH_LANE_NOT_CONVERGED
    int NH_INFO_ABI
    int NH_INFO_NSTATE
    int NH_INFO_NPARAM
    int NH_INFO_NOBS
    int NH_INFO_FLAGS
    int NH_INFO_NQ
    int NH_INFO_LEN
    int NH_HAS_RHS
    int NH_HAS_JAC
    int NH_HAS_DIV
    int NH_HAS_OBS
    int NH_HAS_DHDQ
    int NH_HAS_DHDP
    ctypedef int (*nh_kernel_fn)(void *ctx, const double *t, const double *x, const double *par,
                                 double *out, int64_t nlanes, int64_t ld) noexcept nogil

cdef extern from "nh_core.h":
    enum nh_method:
        NH_RK4
        NH_DOPRI5
        NH_DOP853
        NH_LEAPFROG
        NH_MIDPOINT
        NH_GAUSS4
        NH_GAUSS6
        NH_N_METHODS
    int NH_ADAPTIVE_MASK
    int NH_STAT_STEPS
    int NH_STAT_RHS
    int NH_STAT_REJECTED
    int NH_STAT_ITER
    ctypedef struct nh_system:
        nh_kernel_fn rhs
        void *ctx
        int64_t n
        int64_t npar
        int64_t split
    ctypedef struct nh_options:
        int method
        double rtol
        double atol
        double h
        double hmax
        int64_t max_steps
        double tol
        int64_t max_iter
    int NH_NSTATS
    int nh_integrate_block(const nh_system *sys, const nh_options *opt, const double *t_eval,
                           int64_t nt, const double *x0, const double *par, int64_t par_stride,
                           int64_t lane0, int64_t count, int64_t width, double *y,
                           int32_t *status, int64_t *stats, int64_t *shared_next) noexcept nogil
    int nh_eval_rows(nh_kernel_fn fn, void *ctx, int64_t nin, int64_t nout, int64_t npar,
                     const double *t, const double *x, const double *par, int64_t par_stride,
                     int64_t rows_per_par, int64_t row0, int64_t nrows, double *out,
                     int64_t block) noexcept nogil

cdef extern from *:
    """
    #ifdef _OPENMP
    #define NH_HAVE_OPENMP 1
    #else
    #define NH_HAVE_OPENMP 0
    #endif
    """
    int NH_HAVE_OPENMP

HAVE_OPENMP = bool(NH_HAVE_OPENMP)
# static storage: a capsule keeps a pointer to its name
cdef const char *_CAPSULE_NAME = "nh_kernel_fn"
KERNEL_CAPSULE = <bytes>_CAPSULE_NAME

# Every constant of nh_abi.h and nh_core.h, taken from the headers at build time (never
# retyped): a group's key is the lower-cased rest of the C name (NH_LANE_MAX_STEPS is
# LANE["max_steps"]; NH_OK is ERR["ok"]). nhfast._abi gives them their Python names.
ABI_VERSION = NH_ABI_VERSION
#: Kernel return codes (NH_OK, NH_ERR_*).
ERR = {"ok": NH_OK, "size": NH_ERR_SIZE, "nomem": NH_ERR_NOMEM, "callback": NH_ERR_CALLBACK,
       "arg": NH_ERR_ARG}
#: Per-lane integration status (NH_LANE_*).
LANE = {"ok": NH_LANE_OK, "nonfinite": NH_LANE_NONFINITE,
        "step_underflow": NH_LANE_STEP_UNDERFLOW, "max_steps": NH_LANE_MAX_STEPS,
        "not_converged": NH_LANE_NOT_CONVERGED}
#: Indices into a kernel library's info array (NH_INFO_*, without NH_INFO_LEN).
INFO = {"abi": NH_INFO_ABI, "nstate": NH_INFO_NSTATE, "nparam": NH_INFO_NPARAM,
        "nobs": NH_INFO_NOBS, "flags": NH_INFO_FLAGS, "nq": NH_INFO_NQ}
INFO_LEN = NH_INFO_LEN
#: Bits of the info array's flags entry (NH_HAS_*).
HAS = {"rhs": NH_HAS_RHS, "jac": NH_HAS_JAC, "div": NH_HAS_DIV, "obs": NH_HAS_OBS,
       "dhdq": NH_HAS_DHDQ, "dhdp": NH_HAS_DHDP}
#: enum nh_method.
METHOD = {"rk4": NH_RK4, "dopri5": NH_DOPRI5, "dop853": NH_DOP853, "leapfrog": NH_LEAPFROG,
          "midpoint": NH_MIDPOINT, "gauss4": NH_GAUSS4, "gauss6": NH_GAUSS6}
N_METHODS = NH_N_METHODS
#: Bit (1 << method) set for the adaptive methods.
ADAPTIVE_MASK = NH_ADAPTIVE_MASK
#: Columns of the per-lane statistics (NH_STAT_*).
STAT = {"steps": NH_STAT_STEPS, "rhs": NH_STAT_RHS, "rejected": NH_STAT_REJECTED,
        "iter": NH_STAT_ITER}
NSTATS = NH_NSTATS

_ERRORS = {
    NH_ERR_SIZE: "inconsistent sizes handed to the core",
    NH_ERR_NOMEM: "out of memory for the integrator work buffers",
    NH_ERR_CALLBACK: "a NumPy-backend kernel raised",
    NH_ERR_ARG: "invalid arguments handed to the core",
}


def kernel_capsule(size_t address):
    """Wrap the address of a C kernel (``nh_kernel_fn``) in a signature-named capsule."""
    if address == 0:
        raise ValueError("kernel address is NULL")
    return PyCapsule_New(<void *>address, _CAPSULE_NAME, NULL)


cdef nh_kernel_fn _unwrap(object capsule) except NULL:
    if not PyCapsule_IsValid(capsule, _CAPSULE_NAME):
        raise TypeError("expected a capsule named 'nh_kernel_fn' (a kernel of ABI version "
                        f"{NH_ABI_VERSION}), got {capsule!r}")
    return <nh_kernel_fn>PyCapsule_GetPointer(capsule, _CAPSULE_NAME)


# ------------------------------------------------------------ NumPy-backend kernels ----

cdef int _py_kernel(void *ctx, const double *t, const double *x, const double *par,
                    double *out, int64_t nl, int64_t ld) noexcept nogil:
    with gil:
        obj = <object>ctx
        try:
            if nl <= 0:
                return NH_OK
            # exact extents: component i of lane l at i*ld + l, l < nl (ld may exceed nl)
            tv = <double[:nl]> t
            xv = <double[:(obj.nin - 1) * ld + nl]> x
            pv = <double[:(obj.npar - 1) * ld + nl]> par if obj.npar > 0 else None
            ov = <double[:(obj.nout - 1) * ld + nl]> out if obj.nout > 0 else None
            obj(tv, xv, pv, ov, nl, ld)
            return NH_OK
        except BaseException as exc:  # handed back to the caller, never lost
            obj.error = exc
            return NH_ERR_CALLBACK


def python_kernel_capsule():
    """Capsule of the trampoline that calls a Python kernel object passed as ``ctx``.

    The object must have integer attributes ``nin``, ``npar``, ``nout``, an ``error``
    attribute, and be callable as ``obj(t, x, par, out, nlanes, ld)`` on 1-D buffers in the
    struct-of-arrays layout of the kernel ABI (each of length ``(k - 1) * ld + nlanes``).
    """
    return PyCapsule_New(<void *>_py_kernel, _CAPSULE_NAME, NULL)


cdef int[::1] _codes(int64_t n):
    cdef int[::1] a = cvarray(shape=(n,), itemsize=sizeof(int), format="i")
    a[:] = NH_OK
    return a


cdef _check(int[::1] rcs, object ctx):
    cdef int rc = NH_OK
    cdef Py_ssize_t i
    for i in range(rcs.shape[0]):
        if rcs[i] < rc:
            rc = rcs[i]
    if rc != NH_OK:
        _raise(rc, ctx)


cdef _raise(int rc, object ctx):
    err = getattr(ctx, "error", None) if ctx is not None else None
    if rc == NH_ERR_CALLBACK and err is not None:
        ctx.error = None
        raise RuntimeError(_ERRORS[rc]) from err
    raise RuntimeError(_ERRORS.get(rc, f"core error code {rc}"))


# ------------------------------------------------------------------- integration ----

def integrate_batch(object rhs, object ctx, int64_t n, int64_t npar, int64_t split, int method,
                    const double[::1] t_eval, const double[:, ::1] x0, const double[:, ::1] par,
                    double[:, :, ::1] y, int32_t[::1] status, int64_t[:, ::1] stats,
                    double rtol, double atol, double h, double hmax, int64_t max_steps,
                    double tol, int64_t max_iter, int threads=1, int64_t block=64):
    """Integrate every lane of a batch; see ``nhfast.integrate`` for the meaning of each field.

    ``par`` has one row per lane, or a single row that is broadcast. Each thread runs one
    block of ``block`` lane slots; a slot whose trajectory finishes takes the batch's next
    waiting trajectory from a counter shared by all threads (dynamic scheduling per
    trajectory, one tail per thread). Every trajectory's arithmetic is its own, so results do
    not depend on threads or on which slot ran a trajectory.
    """
    cdef nh_system sys
    cdef nh_options opt
    cdef int64_t ntraj = x0.shape[0], nt = t_eval.shape[0]
    cdef int64_t nblocks, b, par_stride
    cdef const double *pp = NULL
    cdef int64_t *shared = NULL
    if x0.shape[1] != n:
        raise ValueError(f"x0 has {x0.shape[1]} columns, the system has {n} states")
    if y.shape[0] != ntraj or y.shape[1] != nt or y.shape[2] != n:
        raise ValueError("output array y has the wrong shape")
    if status.shape[0] != ntraj or stats.shape[0] != ntraj or stats.shape[1] != NH_NSTATS:
        raise ValueError("status/stats arrays have the wrong shape")
    if par.shape[1] != npar or not (par.shape[0] == 1 or par.shape[0] == ntraj):
        raise ValueError(f"params must have shape ({npar},) or ({ntraj}, {npar})")
    if block < 1 or threads < 1:
        raise ValueError("block and threads must be >= 1")
    if ntraj == 0:
        return
    sys.rhs = _unwrap(rhs)
    sys.ctx = <void *>ctx if ctx is not None else NULL
    sys.n = n
    sys.npar = npar
    sys.split = split
    opt.method = method
    opt.rtol = rtol
    opt.atol = atol
    opt.h = h
    opt.hmax = hmax
    opt.max_steps = max_steps
    opt.tol = tol
    opt.max_iter = max_iter
    par_stride = 0 if par.shape[0] == 1 else npar
    if npar > 0:
        pp = &par[0, 0]
    if ctx is not None:
        threads = 1  # Python kernels hold the GIL: threads would only contend for it
    # one block per thread (no more blocks than blocks' worth of trajectories)
    nblocks = min(<int64_t>threads, (ntraj + block - 1) // block)
    cdef int64_t[::1] counter = cvarray(shape=(1,), itemsize=sizeof(int64_t), format="q")
    counter[0] = 0
    if nblocks > 1:
        shared = &counter[0]
    cdef int[::1] rcs = _codes(nblocks)
    with nogil:
        for b in prange(nblocks, num_threads=nblocks, schedule="static", chunksize=1):
            rcs[b] = nh_integrate_block(&sys, &opt, &t_eval[0], nt, &x0[0, 0], pp, par_stride,
                                        0, ntraj, block, &y[0, 0, 0], &status[0], &stats[0, 0],
                                        shared)
    _check(rcs, ctx)


def eval_soa(object kernel, object ctx, const double[::1] t, const double[:, ::1] x,
             const double[:, ::1] par, double[:, ::1] out, int threads=1, int64_t chunk=4096):
    """Evaluate a kernel on struct-of-arrays data: ``x[i, l]``, ``par[k, l]``, ``out[j, l]``
    for lanes ``l < len(t)``; the kernel is called on chunks of lanes in place (no copies)."""
    cdef nh_kernel_fn fn = _unwrap(kernel)
    cdef int64_t nl = t.shape[0], nin = x.shape[0], npar = par.shape[0], nout = out.shape[0]
    cdef int64_t nchunks, c, l0, m
    cdef void *cctx = <void *>ctx if ctx is not None else NULL
    cdef const double *pp = NULL
    cdef const double *xp = NULL
    cdef double *op = NULL
    if x.shape[1] != nl or out.shape[1] != nl or (npar > 0 and par.shape[1] != nl):
        raise ValueError("x, par and out must have one column per lane")
    if chunk < 1 or threads < 1:
        raise ValueError("chunk and threads must be >= 1")
    if nl == 0 or nout == 0:
        return
    if npar > 0:
        pp = &par[0, 0]
    xp = &x[0, 0]
    op = &out[0, 0]
    if ctx is not None:
        threads = 1
    nchunks = (nl + chunk - 1) // chunk
    cdef int[::1] rcs = _codes(nchunks)
    with nogil:
        for c in prange(nchunks, num_threads=threads, schedule="static"):
            l0 = c * chunk
            m = nl - l0
            if m > chunk:
                m = chunk
            rcs[c] = fn(cctx, &t[l0], xp + l0, pp + l0 if pp != NULL else NULL, op + l0, m, nl)
    _check(rcs, ctx)


def eval_rows(object kernel, object ctx, int64_t nout, const double[::1] t,
              const double[:, ::1] x, const double[:, ::1] par, int64_t rows_per_par,
              double[:, ::1] out, int threads=1, int64_t block=256):
    """Evaluate a kernel on each row of ``x`` (times ``t``); parameters of row r are
    ``par[r // rows_per_par]`` (or the single row of ``par``)."""
    cdef nh_kernel_fn fn = _unwrap(kernel)
    cdef int64_t nrows = x.shape[0], nin = x.shape[1], npar = par.shape[1]
    cdef int64_t chunk, nchunks, c, row0, m, par_stride
    cdef void *cctx = <void *>ctx if ctx is not None else NULL
    cdef const double *pp = NULL
    if t.shape[0] != nrows or out.shape[0] != nrows or out.shape[1] != nout:
        raise ValueError("t/out do not match the rows of x")
    if rows_per_par < 1 or block < 1 or threads < 1:
        raise ValueError("rows_per_par, block and threads must be >= 1")
    if par.shape[0] != 1 and par.shape[0] * rows_per_par < nrows:
        raise ValueError("too few parameter rows for the rows of x")
    if nrows == 0 or nout == 0:
        return
    par_stride = 0 if par.shape[0] == 1 else npar
    if npar > 0:
        pp = &par[0, 0]
    if ctx is not None:
        threads = 1
    chunk = block * 16
    nchunks = (nrows + chunk - 1) // chunk
    cdef int[::1] rcs = _codes(nchunks)
    with nogil:
        for c in prange(nchunks, num_threads=threads, schedule="dynamic", chunksize=1):
            row0 = c * chunk
            m = nrows - row0
            if m > chunk:
                m = chunk
            rcs[c] = nh_eval_rows(fn, cctx, nin, nout, npar, &t[0], &x[0, 0], pp, par_stride,
                                  rows_per_par, row0, m, &out[0, 0], block)
    _check(rcs, ctx)
