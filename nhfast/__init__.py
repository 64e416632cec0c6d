"""nhfast: nonholonomic and vakonomic mechanics with a compiled batch-integration core.

The public API of the runtime: symbolic vector fields, the batch integrators and their
errors. Geometry lives in ``nhfast.symbolic``, the example systems in ``nhfast.systems``,
checks on trajectories in ``nhfast.analysis``. ``integrate`` loads the compiled core on first
use.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

from nhfast import hamiltonised as _hamiltonised
from nhfast import integrate as _integrate
from nhfast._version import __version__
from nhfast.codegen import IndexedProgram
from nhfast.errors import (
    BackendWarning,
    CacheWarning,
    CompilationError,
    ConstraintAlgorithmError,
    HolonomicConstraintsWarning,
    IntegrationError,
    IntegrationWarning,
    UsageError,
)
from nhfast.hamiltonised import GAUSS_METHODS, TimeChangedSystem
from nhfast.integrate import HAMILTONISED, METHODS, STATUS, IntegrationResult
from nhfast.structured_field import StructuredVectorField
from nhfast.vectorfield import HamiltonianSystem, LinearSolve, VectorField

__all__ = [
    "VectorField",
    "HamiltonianSystem",
    "LinearSolve",
    "StructuredVectorField",
    "IndexedProgram",
    "integrate",
    "integrate_hamiltonised",
    "IntegrationResult",
    "TimeChangedSystem",
    "METHODS",
    "HAMILTONISED",
    "GAUSS_METHODS",
    "STATUS",
    "CompilationError",
    "IntegrationError",
    "IntegrationWarning",
    "BackendWarning",
    "CacheWarning",
    "ConstraintAlgorithmError",
    "HolonomicConstraintsWarning",
    "UsageError",
    "__version__",
]

#: Options of ``integrate`` that a ``hamiltonised-*`` method passes on.
_HAMILTONISED_OPTIONS = (
    "params", "h", "threads", "observables", "max_steps", "tol", "max_iter", "keep_failed",
    "block",
)  # fmt: skip


_SIGNATURE = inspect.signature(_integrate.integrate)
_METHOD_AT = list(_SIGNATURE.parameters).index("method")


@functools.wraps(_integrate.integrate)
def integrate(*args: Any, **kwargs: Any) -> IntegrationResult:
    # ``nhfast.integrate.integrate`` for a VectorField; a Chaplygin system with a
    # ``hamiltonised-*`` method goes to integrate_hamiltonised (rtol, atol, hmax do not apply);
    # with ``client=`` (a dask.distributed Client) the batch runs in chunks on the cluster
    if kwargs.get("client") is not None:
        from nhfast.distributed import integrate_ensemble

        return integrate_ensemble(*args, **kwargs)
    # the method without binding the whole signature (tens of us per call): only a
    # hamiltonised-* method needs the bound arguments
    method = kwargs.get("method", args[_METHOD_AT] if len(args) > _METHOD_AT else None)
    if isinstance(method, str) and method in HAMILTONISED:
        given = _SIGNATURE.bind(*args, **kwargs).arguments
        options = {k: given[k] for k in _HAMILTONISED_OPTIONS if k in given}
        return integrate_hamiltonised(
            given["system"],
            given["x0"],
            given["t_eval"],
            method=method.removeprefix("hamiltonised-"),
            **options,
        )
    return _integrate.integrate(*args, **kwargs)


def integrate_hamiltonised(
    system: Any, *args: Any, phi: Any = None, **kwargs: Any
) -> IntegrationResult:
    """Integrate a phi-simple Chaplygin system in Hamiltonised form (measure preserving).

    ``system`` (a ChaplyginSystem, ReducedChaplyginSystem, HamiltonisedSystem or
    TimeChangedSystem) is converted by :func:`nhfast.symbolic.time_change.time_changed_system`
    (with ``phi``, when given, instead of the phi-simplicity search); the other arguments are
    those of :func:`nhfast.hamiltonised.integrate_hamiltonised`.

    Raises
    ------
    TypeError, ValueError
        Bad arguments (naming the argument), or a system that is not phi-simple.
    IntegrationError
        A trajectory failed and ``keep_failed`` is False.
    """
    from nhfast.symbolic.time_change import time_changed_system

    tcs = time_changed_system(system, phi=phi)
    return _hamiltonised.integrate_hamiltonised(tcs, *args, **kwargs)
