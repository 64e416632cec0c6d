# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
# cython: cdivision=True
"""Compiled core of nhfast: batch integrators and kernel evaluation over lanes.

Typed memoryviews, and the NumPy C API in :class:`PreparedCall` alone (the arrays of a call
made and checked in C). Each public function range-checks every integer
before it crosses into C (``ValueError`` naming the argument), checks sizes, releases the
GIL once, runs blocks of lanes over a team of at most ``MAX_THREADS`` threads (OpenMP when
the build has it) and turns C status codes into Python exceptions. Runs are interruptible:
the calling thread, when it is the main thread, runs the Python signal handlers every
``POLL_SECONDS``; one that raises (Ctrl-C: ``KeyboardInterrupt``) stops every thread after
its current step, and its exception propagates once all have left. Kernels arrive as
``PyCapsule`` objects named after their C signature (``"nh_kernel_fn"``; Taylor kernels
``"nh_taylor_fn"``). Every constant of the kernel ABI (``nh_abi.h``) and
of the core (``nh_core.h``) is exported from the C headers, for ``nhfast._abi``.
"""
import operator
import os
import threading

from cpython.exc cimport PyErr_CheckSignals
from cpython.float cimport PyFloat_AS_DOUBLE
from cpython.long cimport PyLong_AsLongLongAndOverflow
from cpython.pycapsule cimport PyCapsule_GetPointer, PyCapsule_New, PyCapsule_IsValid
from libc.stdint cimport int32_t, int64_t
from libc.math cimport NAN, ceil, fabs, isfinite
from libc.stdlib cimport free, malloc
cimport cython
cimport numpy as cnp
from cython.parallel cimport parallel

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
    int NH_HAS_TAYLOR
    int NH_TAYLOR_MAX_ORDER
    ctypedef int (*nh_kernel_fn)(void *ctx, const double *t, const double *x, const double *par,
                                 double *out, int64_t nlanes, int64_t ld) noexcept nogil
    ctypedef int (*nh_taylor_fn)(void *ctx, const double *t, const double *x, const double *par,
                                 double *coef, int64_t order, int64_t nlanes,
                                 int64_t ld) noexcept nogil

cdef extern from "nh_core.h":
    enum nh_method:
        NH_RK4
        NH_DOPRI5
        NH_DOP853
        NH_LEAPFROG
        NH_MIDPOINT
        NH_GAUSS4
        NH_GAUSS6
        NH_TAYLOR
        NH_N_METHODS
    int NH_ADAPTIVE_MASK
    int NH_STAT_STEPS
    int NH_STAT_RHS
    int NH_STAT_REJECTED
    int NH_STAT_ITER
    ctypedef struct nh_system:
        nh_kernel_fn rhs
        nh_taylor_fn taylor
        void *ctx
        int64_t n
        int64_t npar
        int64_t split
        nh_kernel_fn derive
        int64_t nderived
    ctypedef struct nh_options:
        int method
        double rtol
        double atol
        double h
        double hmax
        int64_t max_steps
        double tol
        int64_t max_iter
        nh_interrupt *stop
        int64_t nstiff
        int64_t order
        int64_t order_auto
    int NH_NSTATS
    int NH_LANE_INTERRUPTED
    int NH_ERR_INTERRUPTED
    int NH_LANE_STIFF
    int NH_LANE_LEFT_DOMAIN
    int NH_STIFF_POSITIVES
    int NH_STIFF_RESET
    ctypedef struct nh_interrupt:
        int flag
        int (*poll)(void *ctx) noexcept nogil
        void *ctx
    int64_t nh_taylor_order(int64_t order, double rtol, double atol) noexcept nogil
    int nh_stop_requested(nh_interrupt *s) noexcept nogil
    void nh_request_stop(nh_interrupt *s) noexcept nogil
    int64_t nh_atomic_add(int64_t *p, int64_t v) noexcept nogil
    int64_t nh_atomic_get(int64_t *p) noexcept nogil
    int nh_integrate_block(const nh_system *sys, const nh_options *opt, const double *t_eval,
                           int64_t nt, const double *x0, const double *par, int64_t par_stride,
                           int64_t lane0, int64_t count, int64_t width, double *y,
                           int32_t *status, int64_t *stats, double *t_end,
                           int64_t *shared_next) noexcept nogil
    int nh_eval_rows(nh_kernel_fn fn, void *ctx, int64_t nin, int64_t nout, int64_t npar,
                     const double *t, const double *x, const double *par, int64_t par_stride,
                     int64_t rows_per_par, int64_t row0, int64_t nrows, double *out,
                     int64_t block, nh_interrupt *stop) noexcept nogil

cdef extern from "nh_block.h":
    ctypedef struct nh_events:
        nh_kernel_fn fn
        void *ctx
        int64_t nev
        const int32_t *direction
        const int32_t *terminal
        int64_t cap
        double *t
        int32_t *which
        double *y
        int64_t *count
    int nh_integrate_block_ex(const nh_system *sys, const nh_options *opt, const double *t_eval,
                              int64_t nt, const double *x0, const double *par,
                              int64_t par_stride, int64_t lane0, int64_t count, int64_t width,
                              double *y, int32_t *status, int64_t *stats, double *t_end,
                              int64_t *shared_next, int dense,
                              const nh_events *ev, double *x_end) noexcept nogil

cdef extern from *:
    """
    #ifdef _OPENMP
    #include <omp.h>
    #define NH_HAVE_OPENMP 1
    static int nh_thread_num(void) { return omp_get_thread_num(); }
    static int nh_num_threads(void) { return omp_get_num_threads(); }
    static int nh_num_procs(void) { return omp_get_num_procs(); }
    #else
    #define NH_HAVE_OPENMP 0
    static int nh_thread_num(void) { return 0; }
    static int nh_num_threads(void) { return 1; }
    static int nh_num_procs(void) { return 1; }
    #endif
    #if defined(_WIN32)
    #include <windows.h>
    static double nh_now(void) { return 1e-3 * (double)GetTickCount64(); }
    static void nh_sleep_ms(int ms) { Sleep((DWORD)ms); }
    #else
    #include <time.h>
    static double nh_now(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
    }
    static void nh_sleep_ms(int ms) {
        struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    #endif
    """
    int NH_HAVE_OPENMP
    int nh_thread_num() noexcept nogil
    int nh_num_threads() noexcept nogil
    int nh_num_procs() noexcept nogil
    double nh_now() noexcept nogil
    void nh_sleep_ms(int ms) noexcept nogil

HAVE_OPENMP = bool(NH_HAVE_OPENMP)
# static storage: a capsule keeps a pointer to its name
cdef const char *_CAPSULE_NAME = "nh_kernel_fn"
KERNEL_CAPSULE = <bytes>_CAPSULE_NAME
cdef const char *_TAYLOR_CAPSULE_NAME = "nh_taylor_fn"
TAYLOR_CAPSULE = <bytes>_TAYLOR_CAPSULE_NAME

# Every constant of nh_abi.h and nh_core.h, taken from the headers at build time (never
# retyped): a group's key is the lower-cased rest of the C name (NH_LANE_MAX_STEPS is
# LANE["max_steps"]; NH_OK is ERR["ok"]). nhfast._abi gives them their Python names.
ABI_VERSION = NH_ABI_VERSION
#: Kernel return codes (NH_OK, NH_ERR_*).
ERR = {"ok": NH_OK, "size": NH_ERR_SIZE, "nomem": NH_ERR_NOMEM, "callback": NH_ERR_CALLBACK,
       "arg": NH_ERR_ARG, "interrupted": NH_ERR_INTERRUPTED}
#: Per-lane integration status (NH_LANE_*).
LANE = {"ok": NH_LANE_OK, "nonfinite": NH_LANE_NONFINITE,
        "step_underflow": NH_LANE_STEP_UNDERFLOW, "max_steps": NH_LANE_MAX_STEPS,
        "not_converged": NH_LANE_NOT_CONVERGED, "interrupted": NH_LANE_INTERRUPTED,
        "stiff": NH_LANE_STIFF, "left_domain": NH_LANE_LEFT_DOMAIN}
#: Counts of Hairer's stiffness test (NH_STIFF_*): estimates above the bound that declare a
#: trajectory stiff, consecutive ones below that reset the count.
STIFF = {"positives": NH_STIFF_POSITIVES, "reset": NH_STIFF_RESET}
#: Indices into a kernel library's info array (NH_INFO_*, without NH_INFO_LEN).
INFO = {"abi": NH_INFO_ABI, "nstate": NH_INFO_NSTATE, "nparam": NH_INFO_NPARAM,
        "nobs": NH_INFO_NOBS, "flags": NH_INFO_FLAGS, "nq": NH_INFO_NQ}
INFO_LEN = NH_INFO_LEN
#: Bits of the info array's flags entry (NH_HAS_*).
HAS = {"rhs": NH_HAS_RHS, "jac": NH_HAS_JAC, "div": NH_HAS_DIV, "obs": NH_HAS_OBS,
       "dhdq": NH_HAS_DHDQ, "dhdp": NH_HAS_DHDP, "taylor": NH_HAS_TAYLOR}
#: enum nh_method.
METHOD = {"rk4": NH_RK4, "dopri5": NH_DOPRI5, "dop853": NH_DOP853, "leapfrog": NH_LEAPFROG,
          "midpoint": NH_MIDPOINT, "gauss4": NH_GAUSS4, "gauss6": NH_GAUSS6, "taylor": NH_TAYLOR}
N_METHODS = NH_N_METHODS
#: Largest order of the Taylor method (NH_TAYLOR_MAX_ORDER).
TAYLOR_MAX_ORDER = NH_TAYLOR_MAX_ORDER
#: Bit (1 << method) set for the adaptive methods.
ADAPTIVE_MASK = NH_ADAPTIVE_MASK
#: Columns of the per-lane statistics (NH_STAT_*).
STAT = {"steps": NH_STAT_STEPS, "rhs": NH_STAT_RHS, "rejected": NH_STAT_REJECTED,
        "iter": NH_STAT_ITER}
NSTATS = NH_NSTATS

#: Largest team of threads of one call: 4 per processor, at most 256. A larger ``threads``
#: (and one larger than the work has blocks) is clamped; results do not depend on it.
MAX_THREADS = max(1, min(256, 4 * nh_num_procs()))
#: Interval between two signal checks of the calling thread during a run, in seconds.
POLL_SECONDS = 0.02
cdef double POLL_SECONDS_C = POLL_SECONDS
#: Polls skipped between two readings of the clock while polls come faster than every
#: POLL_SECONDS / 64 (a step of a small system takes well under a microsecond; slow steps
#: read it every time).
cdef int POLL_SKIP = 15

#: The main thread's identifier (signal handlers run there only): compared with
#: ``threading.get_ident()``, a C call, on every call of the core; a forked child's main
#: thread is the one that forked.
_MAIN_THREAD = threading.main_thread().ident


def _main_thread_after_fork() -> None:
    global _MAIN_THREAD
    _MAIN_THREAD = threading.get_ident()


os.register_at_fork(after_in_child=_main_thread_after_fork)
_INT32_MAX = 2**31 - 1
_INT64_MAX = 2**63 - 1

_ERRORS = {
    NH_ERR_SIZE: "inconsistent sizes handed to the core (or too large to address)",
    NH_ERR_NOMEM: "out of memory for the integrator work buffers",
    NH_ERR_CALLBACK: "a NumPy-backend kernel raised",
    NH_ERR_ARG: "invalid arguments handed to the core",
    NH_ERR_INTERRUPTED: "the run was interrupted",
}


cdef int64_t _int_arg(object value, str name, int64_t lo, int64_t hi) except? -1:
    """``value`` (an integer: ``operator.index``) in ``[lo, hi]``, as a C integer; checked
    before any conversion (a C function: nine of them per integrate call)."""
    cdef int overflow = 0
    cdef long long v
    if type(value) is not int:
        try:
            value = operator.index(value)
        except TypeError:
            raise TypeError(f"{name} must be an integer, got {type(value).__name__}") from None
    v = PyLong_AsLongLongAndOverflow(value, &overflow)
    if overflow or not lo <= v <= hi:
        raise ValueError(f"{name} must be an integer in [{lo}, {hi}], got {value}")
    return v


cdef int _team_size(object threads, int64_t items) except -1:
    """Threads of one call: the requested number clamped to the work and to MAX_THREADS."""
    cdef int64_t t = _int_arg(threads, "threads", 1, _INT32_MAX)
    cdef int64_t most = MAX_THREADS
    return <int>max(1, min(t, items, most))


cdef object _capsule(size_t address, const char *name, str what):
    if address == 0:
        raise ValueError(f"{what} address is NULL")
    return PyCapsule_New(<void *>address, name, NULL)


cdef void *_pointer(object capsule, const char *name, str what) except NULL:
    if not PyCapsule_IsValid(capsule, name):
        raise TypeError(f"expected a capsule named {name.decode()!r} (a {what} of ABI version "
                        f"{NH_ABI_VERSION}), got {capsule!r}")
    return PyCapsule_GetPointer(capsule, name)


def kernel_capsule(size_t address):
    """Wrap the address of a C kernel (``nh_kernel_fn``) in a signature-named capsule."""
    return _capsule(address, _CAPSULE_NAME, "kernel")


cdef nh_kernel_fn _unwrap(object capsule) except NULL:
    return <nh_kernel_fn>_pointer(capsule, _CAPSULE_NAME, "kernel")


def taylor_order(int64_t order, double rtol, double atol):
    """The order the Taylor method runs at (``nh_taylor_order``): ``order`` if positive, else
    from the tolerance, heyoka's rule ``ceil(-ln(min(rtol, atol)) / 2 + 1)`` clamped to
    ``[2, TAYLOR_MAX_ORDER]``."""
    return nh_taylor_order(order, rtol, atol)


def taylor_capsule(size_t address):
    """Wrap the address of a C Taylor kernel (``nh_taylor_fn``) in a signature-named capsule."""
    return _capsule(address, _TAYLOR_CAPSULE_NAME, "Taylor kernel")


cdef nh_taylor_fn _unwrap_taylor(object capsule) except NULL:
    return <nh_taylor_fn>_pointer(capsule, _TAYLOR_CAPSULE_NAME, "Taylor kernel")


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


cdef _check(const int *rcs, int64_t n, object ctx):
    cdef int rc = NH_OK
    cdef int64_t i
    for i in range(n):
        if rcs[i] < rc:
            rc = rcs[i]
    if rc != NH_OK:
        _raise(rc, ctx)


cdef _raise(int rc, object ctx):
    err = getattr(ctx, "error", None) if ctx is not None else None
    if rc == NH_ERR_CALLBACK and err is not None:
        ctx.error = None
        if not isinstance(err, Exception):  # KeyboardInterrupt, SystemExit: as they are
            raise err
        raise RuntimeError(_ERRORS[rc]) from err
    raise RuntimeError(_ERRORS.get(rc, f"core error code {rc}"))


# ------------------------------------------------------------ a team of threads ----

# One call's work: `nitems` independent items (lane blocks or chunks of rows) run by a team of
# threads that take them from a shared counter. The team's thread 0 is the calling thread;
# when that is the main thread it checks signals (the hook of `stop`) between steps and,
# once its own items are done, keeps checking while the others finish.
cdef struct _team:
    int64_t nitems
    int64_t next                # next item to take (atomic)
    int64_t done                # threads of the team done with their items (atomic)
    int *rcs                    # [nitems] return code of each item
    nh_interrupt *stop
    int (*item)(void *args, int64_t i) noexcept nogil
    void *args


cdef struct _watch:
    int signals     # 1: the caller is the main thread, so check signals
    double due      # monotonic time of the next check
    int countdown   # polls left before the clock is read again (a step can be sub-microsecond)
    double last     # when the clock was read last
    void *caught    # a Python list (borrowed): the exception a signal handler raised


cdef int _poll(void *p) noexcept nogil:
    """The ``nh_interrupt`` hook: on the calling thread, every POLL_SECONDS, run the Python
    signal handlers; an exception they raise is kept and stops the run."""
    cdef _watch *w = <_watch *>p
    cdef double now
    if not w.signals or nh_thread_num() != 0:
        return 0
    if w.countdown > 0:  # only the team's thread 0 gets here: no race on the count
        w.countdown -= 1
        return 0
    now = nh_now()
    # polls that come fast (short steps): read the clock on every POLL_SKIP + 1-th only
    w.countdown = POLL_SKIP if now - w.last < POLL_SECONDS_C / 64 else 0
    w.last = now
    if now < w.due:
        return 0
    w.due = now + POLL_SECONDS_C
    with gil:
        try:
            PyErr_CheckSignals()
        except BaseException as exc:
            (<list>w.caught).append(exc)
            return 1
    return 0


cdef void _work(_team *tm) noexcept nogil:
    """Body of every thread of the team (inside the one parallel region)."""
    cdef int64_t i
    while not nh_stop_requested(tm.stop):
        i = nh_atomic_add(&tm.next, 1)
        if i >= tm.nitems:
            break
        tm.rcs[i] = tm.item(tm.args, i)
    nh_atomic_add(&tm.done, 1)
    if nh_thread_num() == 0:
        while nh_atomic_get(&tm.done) < nh_num_threads():
            nh_stop_requested(tm.stop)  # keeps checking signals; the others see the flag
            nh_sleep_ms(2)


cdef void _work_alone(_team *tm) noexcept nogil:
    """:func:`_work` of a team of one: the calling thread runs every item, no region opened
    (so no wait for other members, whatever OpenMP reports outside a region)."""
    cdef int64_t i
    for i in range(tm.nitems):
        if nh_stop_requested(tm.stop):
            break
        tm.rcs[i] = tm.item(tm.args, i)


cdef _run_team(int (*item)(void *args, int64_t i) noexcept nogil, void *args, int64_t nitems,
               int threads, nh_interrupt *stop, object ctx):
    """Run items [0, nitems) on `threads` threads; raise what a signal handler raised, or
    the first failing item's error."""
    cdef _team tm
    cdef _watch w
    cdef list caught = []
    # return codes: on the stack for a few items (the usual call), else on the heap
    cdef int small[16]
    cdef int *rcs = small
    cdef int64_t i
    if nitems > 16:
        rcs = <int *>malloc(<size_t>nitems * sizeof(int))
        if rcs == NULL:
            raise MemoryError()
    try:
        for i in range(nitems):
            rcs[i] = NH_OK
        tm.nitems = nitems
        tm.next = 0
        tm.done = 0
        tm.rcs = rcs
        tm.stop = stop
        tm.item = item
        tm.args = args
        w.signals = threading.get_ident() == _MAIN_THREAD
        w.last = nh_now()
        w.due = w.last + POLL_SECONDS_C
        w.countdown = 0
        w.caught = <void *>caught
        stop.flag = 0
        stop.poll = _poll
        stop.ctx = &w
        if threads == 1:  # no parallel region to open: the calling thread is the team
            with nogil:
                _work_alone(&tm)
        else:
            with nogil, parallel(num_threads=threads):
                _work(&tm)
        if caught:
            raise caught[0]
        if stop.flag:  # not reached: only the hook requests a stop
            raise KeyboardInterrupt
        _check(rcs, nitems, ctx)
    finally:
        if rcs != small:
            free(rcs)


# ------------------------------------------------------------------- integration ----

cdef struct _batch:
    nh_system *sys
    nh_options *opt
    const double *t_eval
    int64_t nt
    const double *x0
    const double *par
    int64_t par_stride
    int64_t ntraj
    int64_t block
    double *y
    int32_t *status
    int64_t *stats
    double *t_end
    int64_t *shared
    int dense
    nh_events *ev
    double *x_end


cdef int _batch_item(void *args, int64_t i) noexcept nogil:
    cdef _batch *a = <_batch *>args
    return nh_integrate_block_ex(a.sys, a.opt, a.t_eval, a.nt, a.x0, a.par, a.par_stride, 0,
                                 a.ntraj, a.block, a.y, a.status, a.stats, a.t_end, a.shared,
                                 a.dense, a.ev, a.x_end)


cdef _run_batch(_batch *a, nh_system *sys, nh_options *opt, threads, object ctx):
    """Run the batch ``a`` (its arrays and sizes set) of ``sys`` with ``opt``: one block per
    thread, no more blocks than blocks' worth of trajectories (Python kernels hold the GIL:
    threads would only contend for it), the blocks sharing one counter of trajectories."""
    cdef nh_interrupt stop
    cdef int64_t counter = 0  # the batch's next trajectory, shared by the blocks
    cdef int64_t nblocks = _team_size(1 if ctx is not None else threads,
                                      (a.ntraj + a.block - 1) // a.block)
    opt.stop = &stop
    a.sys = sys
    a.opt = opt
    a.shared = &counter if nblocks > 1 else NULL
    _run_team(_batch_item, a, nblocks, <int>nblocks, &stop, ctx)


cdef int _settings(nh_system *sys, nh_options *opt, _batch *a, n, npar, split, method,
                   max_steps, max_iter, block, nstiff, threads, order, order_auto, dense,
                   taylor, derive, nderived) except -1:
    """The integer and flag arguments of a run (see :func:`integrate_batch`), range-checked
    into ``sys``, ``opt`` and ``a`` (``block``, ``dense``)."""
    sys.n = _int_arg(n, "n", 1, _INT32_MAX)
    sys.npar = _int_arg(npar, "npar", 0, _INT32_MAX)
    sys.split = _int_arg(split, "split", 0, _INT32_MAX)
    sys.nderived = _int_arg(nderived, "nderived", 0, _INT32_MAX)
    sys.derive = NULL
    if (derive is None) != (sys.nderived == 0):
        raise ValueError("derive and nderived >= 1 go together (nderived=0 without derive)")
    opt.method = _int_arg(method, "method", 0, NH_N_METHODS - 1)
    opt.max_steps = _int_arg(max_steps, "max_steps", 1, _INT64_MAX)
    opt.max_iter = _int_arg(max_iter, "max_iter", 1, _INT64_MAX)
    a.block = _int_arg(block, "block", 1, _INT32_MAX)
    opt.nstiff = _int_arg(nstiff, "nstiff", 0, _INT64_MAX)
    _int_arg(threads, "threads", 1, _INT32_MAX)
    opt.order = _int_arg(order, "order", 0, NH_TAYLOR_MAX_ORDER)
    opt.order_auto = _int_arg(order_auto, "order_auto", 0, NH_TAYLOR_MAX_ORDER)
    a.dense = 1 if dense else 0
    if a.dense and opt.method != NH_DOP853 and opt.method != NH_TAYLOR:
        raise ValueError("dense output is implemented for the DOP853 and Taylor methods only")
    if opt.method == NH_TAYLOR and taylor is None:
        raise ValueError("method taylor needs the system's Taylor kernel (taylor=capsule)")
    return 0


cdef int _kernels(nh_system *sys, const nh_options *opt, object rhs, object ctx, object taylor,
                  object derive) except -1:
    """The kernels of a run from their capsules (checked by name) into ``sys``."""
    sys.taylor = NULL
    if opt.method == NH_TAYLOR:
        sys.taylor = _unwrap_taylor(taylor)
        sys.rhs = _unwrap(rhs) if rhs is not None else NULL
    else:
        sys.rhs = _unwrap(rhs)
    if derive is not None:
        if opt.method == NH_TAYLOR or ctx is not None:
            raise ValueError("derive: derived parameters go with a compiled rhs (not taylor)")
        sys.derive = _unwrap(derive)
    sys.ctx = <void *>ctx if ctx is not None else NULL
    return 0


cdef inline void _tolerances(nh_options *opt, double rtol, double atol, double h, double hmax,
                             double tol) noexcept:
    opt.rtol = rtol
    opt.atol = atol
    opt.h = h
    opt.hmax = hmax
    opt.tol = tol


def integrate_batch(object rhs, object ctx, n, npar, split, method,
                    const double[::1] t_eval, const double[:, ::1] x0, const double[:, ::1] par,
                    double[:, :, ::1] y, int32_t[::1] status, int64_t[:, ::1] stats,
                    double rtol, double atol, double h, double hmax, max_steps,
                    double tol, max_iter, threads=1, block=64, nstiff=0, t_end=None,
                    dense=False, events=None, taylor=None, order=0, x_end=None,
                    derive=None, nderived=0, order_auto=0):
    """Integrate every lane of a batch; see ``nhfast.integrate`` for the meaning of each field.

    ``par`` has one row per lane, or a single row that is broadcast. Each thread runs one
    block of ``block`` lane slots; a slot whose trajectory finishes takes the batch's next
    waiting trajectory from a counter shared by all threads (dynamic scheduling per
    trajectory, one tail per thread). Every trajectory's arithmetic is its own, so results do
    not depend on threads or on which slot ran a trajectory. ``threads`` is clamped to the
    number of blocks and to :data:`MAX_THREADS`.

    ``nstiff`` (adaptive methods; 0: off): Hairer's stiffness test from every ``nstiff``-th
    accepted step; a trajectory found stiff stops with status ``LANE["stiff"]``. ``t_end``
    (None, or a float64 array of one entry per lane) receives the time each trajectory
    reached: its final output time, or where it failed (adaptive: the last accepted step;
    fixed-step: the last output time reached). ``x_end`` (None, or a float64 array of shape
    (lanes, n)) receives the state at that time (after a failure, the state the integrator
    had there: the last accepted one, which may be non-finite for a non-finite failure).

    ``dense`` (method DOP853 only): the outputs between the first and the last output time
    come from DOP853's continuous extension of degree 7 (Hairer, Norsett & Wanner, Solving
    ODEs I, II.6), so the steps do not depend on the output times; otherwise every step that
    would pass an output time is shortened to land on it.

    ``taylor`` (method taylor, required there; ``rhs`` may then be None): a capsule of the
    system's Taylor kernel (:func:`taylor_capsule`), called with ``ctx`` like ``rhs``;
    ``order``: its order (0: from the tolerance, else 1 .. :data:`TAYLOR_MAX_ORDER`);
    ``order_auto`` (with ``order`` 0; 0: none): the order to run at instead of the
    tolerance's ``p0`` (:func:`taylor_order`), with at least the accuracy of the rule at
    ``p0`` (above ``p0`` the radius of convergence shrunk by ``exp(-2 (p0 + 1) / p)``, the
    truncation error of the rule at ``p0 + 1``, instead of ``exp(-2)``). With the
    Taylor method ``h > 0`` is a fixed step size, outputs and events always come from the
    series (``dense`` changes nothing).

    ``events`` (needs ``dense``, except with the Taylor method): None, or ``(kernel, ctx, direction, terminal, t, which, y,
    count)``: a kernel capsule of g(t, x, par) with ``nev`` outputs, int32 arrays
    ``direction`` and ``terminal`` of ``nev`` entries, and the outputs ``t`` (float64,
    ``(ntraj, cap)``), ``which`` (int32, ``(ntraj, cap)``), ``y`` (float64, ``(ntraj, cap,
    n)``) and ``count`` (int64, ``(ntraj,)``, zero on entry). Each trajectory's events are
    recorded in time order (at most ``cap``; ``count`` counts all), a terminal one ends it.

    ``derive`` (not with the Taylor method): None, or a capsule of the library's
    ``nh_derive``; ``rhs`` is then its ``nh_rhs_derived`` and ``nderived`` (>= 1) the number
    of derived parameters, computed once per trajectory from its parameter row (nh_abi.h).

    Raises ``ValueError`` naming the argument for an integer out of range or inconsistent
    shapes; on a signal whose handler raises (Ctrl-C), every thread stops after its current
    step and the handler's exception (``KeyboardInterrupt``) propagates.
    """
    cdef nh_system sys
    cdef nh_options opt
    cdef _batch a
    cdef int64_t ntraj = x0.shape[0], nt = t_eval.shape[0]
    cdef double[::1] tend
    cdef double[:, ::1] xend
    cdef nh_events ev
    cdef const int32_t[::1] ev_dir
    cdef const int32_t[::1] ev_term
    cdef double[:, ::1] ev_t
    cdef int32_t[:, ::1] ev_which
    cdef double[:, :, ::1] ev_y
    cdef int64_t[::1] ev_count
    _settings(&sys, &opt, &a, n, npar, split, method, max_steps, max_iter, block, nstiff,
              threads, order, order_auto, dense, taylor, derive, nderived)
    a.ev = NULL
    if events is not None and x0.shape[0] > 0 and t_eval.shape[0] > 0:
        if not a.dense and opt.method != NH_TAYLOR:
            raise ValueError("events are located on the dense output: they need dense=True")
        ev_kernel, ev_ctx, ev_dir, ev_term, ev_t, ev_which, ev_y, ev_count = events
        ev.nev = ev_dir.shape[0]
        ev.cap = ev_t.shape[1]
        if ev.nev < 1 or ev_term.shape[0] != ev.nev:
            raise ValueError("events: direction and terminal need one entry per event")
        if (ev.cap < 1 or ev_t.shape[0] != x0.shape[0] or ev_which.shape[0] != x0.shape[0]
                or ev_which.shape[1] != ev.cap or ev_y.shape[0] != x0.shape[0]
                or ev_y.shape[1] != ev.cap or ev_y.shape[2] != sys.n
                or ev_count.shape[0] != x0.shape[0]):
            raise ValueError("events: output arrays have the wrong shape")
        if ev_ctx is not None:
            raise ValueError("events: the event function must be a compiled kernel")
        ev.fn = _unwrap(ev_kernel)
        ev.ctx = NULL
        ev.direction = &ev_dir[0]
        ev.terminal = &ev_term[0]
        ev.t = &ev_t[0, 0]
        ev.which = &ev_which[0, 0]
        ev.y = &ev_y[0, 0, 0]
        ev.count = &ev_count[0]
        a.ev = &ev
    if t_end is not None:
        tend = t_end
        if tend.shape[0] != ntraj:
            raise ValueError(f"t_end must have one entry per lane ({ntraj}), got {tend.shape[0]}")
    if x0.shape[1] != sys.n:
        raise ValueError(f"x0 has {x0.shape[1]} columns, the system has {sys.n} states")
    if x_end is not None:
        xend = x_end
        if xend.shape[0] != ntraj or xend.shape[1] != sys.n:
            raise ValueError(f"x_end must have shape ({ntraj}, {sys.n})")
    if y.shape[0] != ntraj or y.shape[1] != nt or y.shape[2] != sys.n:
        raise ValueError("output array y has the wrong shape")
    if status.shape[0] != ntraj or stats.shape[0] != ntraj or stats.shape[1] != NH_NSTATS:
        raise ValueError("status/stats arrays have the wrong shape")
    if par.shape[1] != sys.npar or not (par.shape[0] == 1 or par.shape[0] == ntraj):
        raise ValueError(f"params must have shape ({sys.npar},) or ({ntraj}, {sys.npar})")
    if ntraj == 0 or nt == 0:
        if nt == 0 and ntraj > 0:
            raise ValueError("t_eval must hold at least one time")
        return
    _kernels(&sys, &opt, rhs, ctx, taylor, derive)
    _tolerances(&opt, rtol, atol, h, hmax, tol)
    a.t_eval = &t_eval[0]
    a.nt = nt
    a.x0 = &x0[0, 0]
    a.par = &par[0, 0] if sys.npar > 0 else NULL
    a.par_stride = 0 if par.shape[0] == 1 else sys.npar
    a.ntraj = ntraj
    a.y = &y[0, 0, 0]
    a.status = &status[0]
    a.stats = &stats[0, 0]
    a.t_end = &tend[0] if t_end is not None else NULL
    a.x_end = &xend[0, 0] if x_end is not None else NULL
    _run_batch(&a, &sys, &opt, threads, ctx)


# --------------------------------------------------------------- prepared calls ----

cnp.import_array()
cdef object _NEW = object.__new__


cdef inline bint _doubles(object a, int ndim) noexcept:
    """Whether ``a`` is an ndarray (exactly) of ``ndim`` dimensions holding native, aligned
    float64 values, C-contiguous."""
    if type(a) is not cnp.ndarray:
        return False
    cdef cnp.ndarray v = <cnp.ndarray>a
    return (cnp.PyArray_NDIM(v) == ndim and cnp.PyArray_TYPE(v) == cnp.NPY_DOUBLE
            and cnp.PyArray_IS_C_CONTIGUOUS(v) and cnp.PyArray_ISALIGNED(v)
            and cnp.PyArray_ISNOTSWAPPED(v))


cdef bint _finite(const double *v, int64_t m, bint positive) noexcept nogil:
    """Whether v[0:m] are finite (and > 0 when ``positive``)."""
    cdef int64_t i
    cdef bint ok = True
    for i in range(m):
        ok = ok and isfinite(v[i]) and (not positive or v[i] > 0.0)
    return ok


cdef inline bint _all_positive(const double *v, int64_t m) noexcept nogil:
    """Whether v[0:m] are all > 0 (NaN is not)."""
    cdef int64_t j
    for j in range(m):
        if not (v[j] > 0.0):
            return False
    return True


cdef inline bint _same(object a, object b) except -1:
    """Whether the option value ``a`` is the prepared ``b``: the same object, or of the same
    type and equal (a plain float, int, bool, str: ``threads=True`` is not ``threads=1``)."""
    return a is b or (type(a) is type(b) and a == b)


@cython.auto_pickle(False)
cdef class PreparedCall:
    """One system's call of ``nhfast.integrate`` with its options checked once.

    Called with the same options (each compared by type and value) and inputs of the common
    kinds -- ``x0`` a float64 C-contiguous array ``(n,)`` or ``(n_traj, n)``, ``t_eval`` a
    list of two floats or a float64 C-contiguous 1-d array, ``params`` None (a system without
    parameters) or a float64 C-contiguous ``(n_params,)`` or ``(n_traj, n_params)`` array --
    whose values certainly pass the full checks, it runs the core in one compiled pass and
    returns the result; anything else returns None (the caller then runs the full checks,
    which raise the errors).

    ``options`` are the option values of the checked call, in the order of ``__call__``
    after ``params`` (plain floats, ints, bools, strings or None); ``core`` are
    :func:`integrate_batch`'s arguments of that call without its arrays, in its order:
    ``(rhs, ctx, n, npar, split, method, rtol, atol, h, hmax, max_steps, tol, max_iter,
    threads, block, nstiff, dense, taylor, order, derive, nderived, order_auto)``, ``ctx``
    None (compiled kernels). What the inputs must meet: ``positive`` (every parameter > 0,
    else finite), ``domain`` (None, or the capsule of a compiled kernel of the ``ndomain``
    conditions ``g > 0`` that every initial state meets at ``t_eval[0]``) and
    ``count_steps`` (a fixed-step method: the steps ``h`` takes over ``t_eval``, at least one
    per interval, at most ``max_steps``). A domain can be watched (with ``domain``): on the
    output rows (``watch_rows``: after the run, every output row of the trajectories that
    finished is checked against its conditions), or along the steps (``watch_events``, the
    int32 arrays ``(direction, terminal)`` of its conditions as terminal events, located by
    the core into a record of one event per trajectory); either way the state where each
    trajectory stopped is kept (``x_end``; at most ``x_end_rows`` trajectories, else None is
    returned before the run). The result is ``result_type`` with the attributes ``t, y,
    status, method, observables ({}), t_reached, events (None)`` and the core's statistics
    as ``_core_stats``; ``finish(result, x0, params, failed, outside, x_end, record)`` runs
    after a run with ``failed`` trajectories that failed, ``outside`` finished ones with an
    output row outside the domain or a domain event recorded (counts; ``x_end`` None when
    the domain is not watched; ``record`` the arrays ``(t, which, y, count)`` of the events,
    or None), or always with ``wanted``.
    """
    cdef nh_system sys
    cdef nh_options opt
    cdef _batch base  # block and dense of the run
    cdef object threads
    cdef tuple options
    cdef tuple keep  # the capsules the kernel pointers come from
    cdef bint positive, count_steps, wanted, watch_rows, watch_events
    cdef const int32_t *ev_direction
    cdef const int32_t *ev_terminal
    cdef nh_kernel_fn domain
    cdef int64_t ndomain, x_end_rows
    cdef object result_type, method, finish

    def __init__(self, tuple options, tuple core, bint positive, domain, ndomain,
                 bint count_steps, bint watch_rows, watch_events, x_end_rows, result_type,
                 str method, finish, bint wanted):
        cdef const int32_t[::1] direction
        cdef const int32_t[::1] terminal
        (rhs, ctx, n, npar, split, code, rtol, atol, h, hmax, max_steps, tol, max_iter,
         threads, block, nstiff, dense, taylor, order, derive, nderived, order_auto) = core
        if ctx is not None:
            raise ValueError("a prepared call needs compiled kernels (ctx None)")
        if len(options) != 18:
            raise ValueError(f"options: 18 values expected, got {len(options)}")
        _settings(&self.sys, &self.opt, &self.base, n, npar, split, code, max_steps,
                  max_iter, block, nstiff, threads, order, order_auto, dense, taylor, derive,
                  nderived)
        _kernels(&self.sys, &self.opt, rhs, None, taylor, derive)
        _tolerances(&self.opt, rtol, atol, h, hmax, tol)
        self.ndomain = _int_arg(ndomain, "ndomain", 0, 16)
        if (domain is None) != (self.ndomain == 0):
            raise ValueError("domain and ndomain >= 1 go together")
        self.domain = _unwrap(domain) if domain is not None else NULL
        if count_steps and not self.opt.h > 0.0:
            raise ValueError("count_steps needs the step size h > 0")
        if watch_rows and domain is None:
            raise ValueError("watch_rows needs the domain's kernel")
        self.watch_rows = watch_rows
        self.watch_events = watch_events is not None
        if self.watch_events:
            direction, terminal = watch_events
            if (domain is None or watch_rows or direction.shape[0] != self.ndomain
                    or terminal.shape[0] != self.ndomain):
                raise ValueError("watch_events: one direction and terminal per domain "
                                 "condition, without watch_rows")
            if not self.base.dense and self.opt.method != NH_TAYLOR:
                raise ValueError("watch_events needs dense output or the Taylor method")
            self.ev_direction = &direction[0]
            self.ev_terminal = &terminal[0]
        self.x_end_rows = _int_arg(x_end_rows, "x_end_rows", 0, _INT64_MAX)
        self.threads = threads
        self.options = options
        self.keep = (rhs, taylor, derive, domain, watch_events)
        self.positive = positive
        self.count_steps = count_steps
        self.result_type = result_type
        self.method = method
        self.finish = finish
        self.wanted = wanted

    def __call__(self, x0, t_eval, params, method, rtol, atol, h, threads, observables,
                 max_steps, hmax, tol, max_iter, keep_failed, block, stiffness_check, dense,
                 events, max_events, order, watch_domain):
        cdef tuple o = self.options
        if not (_same(method, o[0]) and _same(rtol, o[1]) and _same(atol, o[2])
                and _same(h, o[3]) and _same(threads, o[4]) and _same(observables, o[5])
                and _same(max_steps, o[6]) and _same(hmax, o[7]) and _same(tol, o[8])
                and _same(max_iter, o[9]) and _same(keep_failed, o[10])
                and _same(block, o[11]) and _same(stiffness_check, o[12])
                and _same(dense, o[13]) and _same(events, o[14])
                and _same(max_events, o[15]) and _same(order, o[16])
                and _same(watch_domain, o[17])):
            return None
        return self._run(x0, t_eval, params)

    cdef bint _inside(self, const double *t, const double *x, const double *par) noexcept nogil:
        """Whether every condition of the domain is > 0 at (t, x, par) (one state; False
        when the kernel fails)."""
        cdef double out[16]
        return (self.domain(NULL, t, x, par, out, 1, 1) == NH_OK
                and _all_positive(out, self.ndomain))

    cdef object _run(self, x0, t_eval, params):
        cdef int64_t n = self.sys.n, npar = self.sys.npar
        cdef int64_t ntraj, nt, prows = 1, pstride, r, k
        cdef cnp.npy_intp dims[3]
        cdef double t2[2]
        cdef const double *tp
        cdef const double *xp
        cdef const double *pp = NULL
        cdef double d, total
        cdef nh_options opt = self.opt  # a copy: its stop hook is this call's
        cdef _batch a
        cdef int64_t failed = 0, outside = 0
        cdef double *yp
        cdef int32_t *st
        cdef double *tr
        cdef cnp.ndarray xa, pa, ta, t, y, status, stats, t_reached, x_end = None
        cdef cnp.ndarray ev_t, ev_which, ev_y, ev_count
        cdef nh_events ev
        cdef int64_t *cnt
        cdef int64_t hits = 0
        cdef double *fill
        cdef int32_t *ifill
        # states: (n,) or (n_traj, n), finite
        if _doubles(x0, 1):
            xa = <cnp.ndarray>x0
            if cnp.PyArray_DIM(xa, 0) != n:
                return None
            ntraj = 1
        elif _doubles(x0, 2):
            xa = <cnp.ndarray>x0
            if cnp.PyArray_DIM(xa, 1) != n or cnp.PyArray_DIM(xa, 0) < 1:
                return None
            ntraj = cnp.PyArray_DIM(xa, 0)
        else:
            return None
        xp = <const double *>cnp.PyArray_DATA(xa)
        if not _finite(xp, ntraj * n, False):
            return None
        # output times: [t0, t1] of floats, or a float64 array; finite, strictly monotonic
        t = None
        if type(t_eval) is list and len(<list>t_eval) == 2:
            t0, t1 = <list>t_eval
            if type(t0) is not float or type(t1) is not float:
                return None
            t2[0] = PyFloat_AS_DOUBLE(t0)
            t2[1] = PyFloat_AS_DOUBLE(t1)
            if not (isfinite(t2[0]) and isfinite(t2[1]) and t2[0] != t2[1]):
                return None
            nt = 2
            tp = t2
        elif _doubles(t_eval, 1):
            ta = <cnp.ndarray>t_eval
            nt = cnp.PyArray_DIM(ta, 0)
            tp = <const double *>cnp.PyArray_DATA(ta)
            if nt < 1 or not _finite(tp, nt, False):
                return None
            for r in range(1, nt):  # strictly monotonic: one direction throughout
                d = tp[r] - tp[r - 1]
                if not (d != 0.0 and (d > 0) == (tp[1] - tp[0] > 0)):
                    return None
            t = ta
        else:
            return None
        # parameters: none, (n_params,) or (n_traj, n_params); finite (and > 0)
        if npar == 0:
            if params is not None:
                return None
        else:
            if _doubles(params, 1):
                pa = <cnp.ndarray>params
                if cnp.PyArray_DIM(pa, 0) != npar:
                    return None
            elif _doubles(params, 2):
                pa = <cnp.ndarray>params
                if cnp.PyArray_DIM(pa, 0) != ntraj or cnp.PyArray_DIM(pa, 1) != npar:
                    return None
                prows = ntraj
            else:
                return None
            pp = <const double *>cnp.PyArray_DATA(pa)
            if not _finite(pp, prows * npar, self.positive):
                return None
        pstride = npar if prows > 1 else 0
        # the domain at t_eval[0]: every condition > 0 at every initial state
        if self.ndomain:
            for r in range(ntraj):
                if not self._inside(tp, xp + r * n, pp + r * pstride if pp != NULL else NULL):
                    return None
        # a fixed-step method: its step count within max_steps
        if self.count_steps:
            total = 0.0
            for r in range(1, nt):
                d = ceil(fabs(tp[r] - tp[r - 1]) / opt.h * (1 - 1e-12))
                total += d if d > 1.0 else 1.0
            if not total <= <double>opt.max_steps:
                return None
        if (self.watch_rows or self.watch_events) and ntraj > self.x_end_rows:
            return None
        # outputs
        if t is None:
            dims[0] = 2
            t = cnp.PyArray_EMPTY(1, dims, cnp.NPY_DOUBLE, 0)
            (<double *>cnp.PyArray_DATA(t))[0] = t2[0]
            (<double *>cnp.PyArray_DATA(t))[1] = t2[1]
            tp = <const double *>cnp.PyArray_DATA(t)
        dims[0] = ntraj
        dims[1] = nt
        dims[2] = n
        y = cnp.PyArray_EMPTY(3, dims, cnp.NPY_DOUBLE, 0)
        t_reached = cnp.PyArray_EMPTY(1, dims, cnp.NPY_DOUBLE, 0)
        status = cnp.PyArray_ZEROS(1, dims, cnp.NPY_INT32, 0)
        dims[1] = NH_NSTATS
        stats = cnp.PyArray_ZEROS(2, dims, cnp.NPY_INT64, 0)
        tr = <double *>cnp.PyArray_DATA(t_reached)
        for r in range(ntraj):
            tr[r] = tp[0]
        st = <int32_t *>cnp.PyArray_DATA(status)
        a = self.base
        a.t_eval = tp
        a.nt = nt
        a.x0 = xp
        a.par = pp
        a.par_stride = pstride
        a.ntraj = ntraj
        a.y = <double *>cnp.PyArray_DATA(y)
        a.status = st
        a.stats = <int64_t *>cnp.PyArray_DATA(stats)
        a.t_end = tr
        a.x_end = NULL
        if self.watch_rows or self.watch_events:
            dims[1] = n
            x_end = cnp.PyArray_EMPTY(2, dims, cnp.NPY_DOUBLE, 0)
            a.x_end = <double *>cnp.PyArray_DATA(x_end)
        a.ev = NULL
        if self.watch_events:  # a record of one event per trajectory: NaN times, -1 which
            dims[1] = 1
            dims[2] = n
            ev_t = cnp.PyArray_EMPTY(2, dims, cnp.NPY_DOUBLE, 0)
            ev_which = cnp.PyArray_EMPTY(2, dims, cnp.NPY_INT32, 0)
            ev_y = cnp.PyArray_EMPTY(3, dims, cnp.NPY_DOUBLE, 0)
            ev_count = cnp.PyArray_ZEROS(1, dims, cnp.NPY_INT64, 0)
            fill = <double *>cnp.PyArray_DATA(ev_t)
            for r in range(ntraj):
                fill[r] = NAN
            fill = <double *>cnp.PyArray_DATA(ev_y)
            for r in range(ntraj * n):
                fill[r] = NAN
            ifill = <int32_t *>cnp.PyArray_DATA(ev_which)
            for r in range(ntraj):
                ifill[r] = -1
            cnt = <int64_t *>cnp.PyArray_DATA(ev_count)
            ev.fn = self.domain
            ev.ctx = NULL
            ev.nev = self.ndomain
            ev.direction = self.ev_direction
            ev.terminal = self.ev_terminal
            ev.cap = 1
            ev.t = <double *>cnp.PyArray_DATA(ev_t)
            ev.which = ifill
            ev.y = <double *>cnp.PyArray_DATA(ev_y)
            ev.count = cnt
            a.ev = &ev
        _run_batch(&a, &self.sys, &opt, self.threads, None)
        for r in range(ntraj):
            failed += st[r] != 0
        if self.watch_rows:  # the domain at every output row of the finished trajectories
            yp = a.y
            for r in range(ntraj):
                if st[r] != 0:
                    continue
                for k in range(nt):
                    if not self._inside(tp + k, yp + (r * nt + k) * n,
                                        pp + r * pstride if pp != NULL else NULL):
                        outside += 1
                        break
        if self.watch_events:
            for r in range(ntraj):
                hits += cnt[r] != 0
        res = _NEW(self.result_type)
        res.__dict__ = {"t": t, "y": y, "status": status, "method": self.method,
                        "observables": {}, "t_reached": t_reached, "events": None,
                        "_core_stats": stats}
        if failed or outside or hits or self.wanted:
            self.finish(res, x0, params, failed, outside + hits, x_end,
                        (ev_t, ev_which, ev_y, ev_count) if self.watch_events else None)
        return res


# ------------------------------------------------------------ kernel evaluation ----

cdef struct _soa:
    nh_kernel_fn fn
    void *ctx
    const double *t
    const double *x
    const double *par
    double *out
    int64_t nl
    int64_t chunk
    nh_interrupt *stop


cdef inline int64_t _chunk_len(int64_t start, int64_t chunk, int64_t total) noexcept nogil:
    """Items of the chunk that starts at ``start``: ``chunk``, fewer in the last one."""
    return chunk if total - start > chunk else total - start


cdef int _soa_item(void *args, int64_t c) noexcept nogil:
    cdef _soa *a = <_soa *>args
    cdef int64_t l0 = c * a.chunk
    cdef int64_t m = _chunk_len(l0, a.chunk, a.nl)
    return a.fn(a.ctx, a.t + l0, a.x + l0, a.par + l0 if a.par != NULL else NULL, a.out + l0,
                m, a.nl)


def eval_soa(object kernel, object ctx, const double[::1] t, const double[:, ::1] x,
             const double[:, ::1] par, double[:, ::1] out, threads=1, chunk=4096):
    """Evaluate a kernel on struct-of-arrays data: ``x[i, l]``, ``par[k, l]``, ``out[j, l]``
    for lanes ``l < len(t)``; the kernel is called on chunks of lanes in place (no copies).

    ``threads`` is clamped to the number of chunks and to :data:`MAX_THREADS`; the run is
    interruptible between chunks (see :func:`integrate_batch`).
    """
    cdef nh_kernel_fn fn = _unwrap(kernel)
    cdef int64_t nl = t.shape[0], npar = par.shape[0], nout = out.shape[0]
    cdef nh_interrupt stop
    cdef _soa a
    a.chunk = _int_arg(chunk, "chunk", 1, _INT32_MAX)
    _int_arg(threads, "threads", 1, _INT32_MAX)
    if x.shape[1] != nl or out.shape[1] != nl or (npar > 0 and par.shape[1] != nl):
        raise ValueError("x, par and out must have one column per lane")
    if nl == 0 or nout == 0:
        return
    nchunks = (nl + a.chunk - 1) // a.chunk
    a.fn = fn
    a.ctx = <void *>ctx if ctx is not None else NULL
    a.t = &t[0]
    a.x = &x[0, 0]
    a.par = &par[0, 0] if npar > 0 else NULL
    a.out = &out[0, 0]
    a.nl = nl
    a.stop = &stop
    nthreads = _team_size(1 if ctx is not None else threads, nchunks)
    _run_team(_soa_item, &a, nchunks, nthreads, &stop, ctx)


cdef struct _rows:
    nh_kernel_fn fn
    void *ctx
    int64_t nin, nout, npar, nrows, rows_per_par, par_stride, chunk, block
    const double *t
    const double *x
    const double *par
    double *out
    nh_interrupt *stop


cdef int _rows_item(void *args, int64_t c) noexcept nogil:
    cdef _rows *a = <_rows *>args
    cdef int64_t row0 = c * a.chunk
    cdef int64_t m = _chunk_len(row0, a.chunk, a.nrows)
    return nh_eval_rows(a.fn, a.ctx, a.nin, a.nout, a.npar, a.t, a.x, a.par, a.par_stride,
                        a.rows_per_par, row0, m, a.out, a.block, a.stop)


def all_positive_rows(object kernel, object ctx, nout, const double[::1] t,
                      const double[:, ::1] x, const double[::1] par):
    """Whether every output of a compiled kernel is > 0 on every row of ``x`` (times ``t``,
    the one parameter row ``par``; one time serves every row); NaN is not > 0. Rows go to the
    kernel one at a time as
    blocks of one lane (a row is then its own struct-of-arrays block): no gathering, for the
    few rows of one trajectory (a domain's conditions at its states)."""
    cdef nh_kernel_fn fn = _unwrap(kernel)
    if ctx is not None:
        raise ValueError("all_positive_rows needs a compiled kernel")
    cdef int64_t m = _int_arg(nout, "nout", 0, _INT32_MAX)
    cdef int64_t nrows = x.shape[0]
    cdef int64_t tstep = 0 if t.shape[0] == 1 else 1  # one time: every row's
    if t.shape[0] != nrows and t.shape[0] != 1:
        raise ValueError("t does not match the rows of x")
    cdef double small[16]
    cdef double *out = small
    cdef int64_t r
    cdef int rc = NH_OK
    cdef bint ok = True
    cdef const double *p = &par[0] if par.shape[0] > 0 else NULL
    if m == 0 or nrows == 0:
        return True
    if m > 16:
        out = <double *>malloc(sizeof(double) * m)
        if out == NULL:
            raise MemoryError()
    try:
        with nogil:
            for r in range(nrows):
                rc = fn(NULL, &t[r * tstep], &x[r, 0], p, out, 1, 1)
                if rc != NH_OK:
                    break
                if not _all_positive(out, m):
                    ok = False
                    break
    finally:
        if out != small:
            free(out)
    if rc != NH_OK:
        _raise(rc, None)
    return ok


def plain_inputs(const double[:, ::1] x, const double[:, ::1] par, bint positive):
    """Whether every entry of ``x`` is finite and every entry of ``par`` finite (and > 0 when
    ``positive``): one pass in C, for the common call of ``nhfast.integrate``."""
    cdef int64_t i, j
    cdef double v
    cdef bint ok = True
    for i in range(x.shape[0]):
        for j in range(x.shape[1]):
            ok = ok and isfinite(x[i, j])
    for i in range(par.shape[0]):
        for j in range(par.shape[1]):
            v = par[i, j]
            ok = ok and isfinite(v) and (not positive or v > 0.0)
    return ok


def eval_rows(object kernel, object ctx, nout, const double[::1] t,
              const double[:, ::1] x, const double[:, ::1] par, rows_per_par,
              double[:, ::1] out, threads=1, block=256):
    """Evaluate a kernel on each row of ``x`` (times ``t``); parameters of row r are
    ``par[r // rows_per_par]`` (or the single row of ``par``).

    Rows go to the kernel in lane blocks of ``block``; ``threads`` is clamped to the number
    of chunks of 16 blocks and to :data:`MAX_THREADS`; the run is interruptible between
    blocks (see :func:`integrate_batch`).
    """
    cdef nh_kernel_fn fn = _unwrap(kernel)
    cdef nh_interrupt stop
    cdef _rows a
    a.nout = _int_arg(nout, "nout", 0, _INT32_MAX)
    a.rows_per_par = _int_arg(rows_per_par, "rows_per_par", 1, _INT64_MAX)
    a.block = _int_arg(block, "block", 1, _INT32_MAX)
    _int_arg(threads, "threads", 1, _INT32_MAX)
    a.nrows = x.shape[0]
    a.nin = x.shape[1]
    a.npar = par.shape[1]
    if t.shape[0] != a.nrows or out.shape[0] != a.nrows or out.shape[1] != a.nout:
        raise ValueError("t/out do not match the rows of x")
    if par.shape[0] != 1 and par.shape[0] * a.rows_per_par < a.nrows:
        raise ValueError("too few parameter rows for the rows of x")
    if a.nrows == 0 or a.nout == 0:
        return
    # no wider than the rows: a few rows get small gather buffers (a 256-lane block of a
    # 128-state system is 256 kB, allocated and faulted in per call), the same values
    if a.block > a.nrows:
        a.block = a.nrows
    a.par_stride = 0 if par.shape[0] == 1 else a.npar
    a.fn = fn
    a.ctx = <void *>ctx if ctx is not None else NULL
    a.t = &t[0]
    a.x = &x[0, 0]
    a.par = &par[0, 0] if a.npar > 0 else NULL
    a.out = &out[0, 0]
    a.stop = &stop
    a.chunk = a.block * 16
    nchunks = (a.nrows + a.chunk - 1) // a.chunk
    nthreads = _team_size(1 if ctx is not None else threads, nchunks)
    _run_team(_rows_item, &a, nchunks, nthreads, &stop, ctx)
