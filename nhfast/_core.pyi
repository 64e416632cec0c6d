"""Type stubs of the compiled core (nhfast/_core.pyx)."""

from typing import Any

import numpy as np
from numpy.typing import NDArray

ABI_VERSION: int
HAVE_OPENMP: bool
NSTATS: int
KERNEL_CAPSULE: bytes

def kernel_capsule(address: int) -> Any: ...
def python_kernel_capsule() -> Any: ...
def integrate_batch(
    rhs: Any,
    ctx: Any,
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
) -> None: ...
def eval_soa(
    kernel: Any,
    ctx: Any,
    t: NDArray[np.float64],
    x: NDArray[np.float64],
    par: NDArray[np.float64],
    out: NDArray[np.float64],
    threads: int = 1,
    chunk: int = 4096,
) -> None: ...
def eval_rows(
    kernel: Any,
    ctx: Any,
    nout: int,
    t: NDArray[np.float64],
    x: NDArray[np.float64],
    par: NDArray[np.float64],
    rows_per_par: int,
    out: NDArray[np.float64],
    threads: int = 1,
    block: int = 256,
) -> None: ...
