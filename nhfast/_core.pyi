"""Type stubs of the compiled core (nhfast/_core.pyx); checked by ``mypy.stubtest``."""

from collections.abc import Callable
from typing import Protocol

import numpy as np
from numpy.typing import NDArray
from typing_extensions import Buffer, CapsuleType, disjoint_base

class _PythonKernel(Protocol):
    """A NumPy-backend kernel driven through :func:`python_kernel_capsule`."""

    nin: int
    npar: int
    nout: int
    error: BaseException | None

    def __call__(
        self,
        t: Buffer,
        x: Buffer,
        par: Buffer | None,
        out: Buffer | None,
        nlanes: int,
        ld: int,
        /,
    ) -> object: ...

__test__: dict[str, str]  # Cython's doctest table
HAVE_OPENMP: bool
KERNEL_CAPSULE: bytes
TAYLOR_CAPSULE: bytes

# Constants of nh_abi.h and nh_core.h (the C headers are their only definition).
ABI_VERSION: int
ERR: dict[str, int]
LANE: dict[str, int]
INFO: dict[str, int]
INFO_LEN: int
HAS: dict[str, int]
METHOD: dict[str, int]
N_METHODS: int
TAYLOR_MAX_ORDER: int
ADAPTIVE_MASK: int
STAT: dict[str, int]
STIFF: dict[str, int]
NSTATS: int
#: Largest team of threads of one call (``threads`` beyond it, or beyond the work, is clamped).
MAX_THREADS: int
#: Interval between two signal checks of the calling thread during a run, in seconds.
POLL_SECONDS: float

def kernel_capsule(address: int) -> CapsuleType: ...
def taylor_order(order: int, rtol: float, atol: float) -> int: ...
def taylor_capsule(address: int) -> CapsuleType: ...
def python_kernel_capsule() -> CapsuleType: ...
def integrate_batch(
    rhs: CapsuleType | None,
    ctx: _PythonKernel | None,
    n: int,
    npar: int,
    split: int,
    method: int,
    t_eval: NDArray[np.float64],
    x0: NDArray[np.float64],
    par: NDArray[np.float64],
    y: NDArray[np.float64],
    status: NDArray[np.int32],
    stats: NDArray[np.int64],
    rtol: float,
    atol: float,
    h: float,
    hmax: float,
    max_steps: int,
    tol: float,
    max_iter: int,
    threads: int = 1,
    block: int = 64,
    nstiff: int = 0,
    t_end: NDArray[np.float64] | None = None,
    dense: bool = False,
    events: tuple[
        CapsuleType,
        _PythonKernel | None,
        NDArray[np.int32],
        NDArray[np.int32],
        NDArray[np.float64],
        NDArray[np.int32],
        NDArray[np.float64],
        NDArray[np.int64],
    ]
    | None = None,
    taylor: CapsuleType | None = None,
    order: int = 0,
    x_end: NDArray[np.float64] | None = None,
    derive: CapsuleType | None = None,
    nderived: int = 0,
    order_auto: int = 0,
) -> None: ...
def all_positive_rows(
    kernel: CapsuleType,
    ctx: None,
    nout: int,
    t: NDArray[np.float64],
    x: NDArray[np.float64],
    par: NDArray[np.float64],
) -> bool: ...
def plain_inputs(x: NDArray[np.float64], par: NDArray[np.float64], positive: bool) -> bool: ...
def eval_soa(
    kernel: CapsuleType,
    ctx: _PythonKernel | None,
    t: NDArray[np.float64],
    x: NDArray[np.float64],
    par: NDArray[np.float64],
    out: NDArray[np.float64],
    threads: int = 1,
    chunk: int = 4096,
) -> None: ...
def eval_rows(
    kernel: CapsuleType,
    ctx: _PythonKernel | None,
    nout: int,
    t: NDArray[np.float64],
    x: NDArray[np.float64],
    par: NDArray[np.float64],
    rows_per_par: int,
    out: NDArray[np.float64],
    threads: int = 1,
    block: int = 256,
) -> None: ...

@disjoint_base
class PreparedCall:
    """One system's call of ``nhfast.integrate`` with its options checked once."""

    def __init__(
        self,
        options: tuple[object, ...],
        core: tuple[object, ...],
        positive: bool,
        domain: CapsuleType | None,
        ndomain: int,
        count_steps: bool,
        watch_rows: bool,
        watch_events: tuple[NDArray[np.int32], NDArray[np.int32]] | None,
        x_end_rows: int,
        result_type: type,
        method: str,
        finish: Callable[
            [
                object,
                NDArray[np.float64],
                NDArray[np.float64] | None,
                int,
                int,
                NDArray[np.float64] | None,
                tuple[
                    NDArray[np.float64], NDArray[np.int32], NDArray[np.float64], NDArray[np.int64]
                ]
                | None,
            ],
            object,
        ],
        wanted: bool,
    ) -> None: ...
    def __call__(self, x0: object, t_eval: object, params: object, *options: object) -> object: ...
