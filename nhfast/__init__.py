"""nhfast: nonholonomic and vakonomic mechanics with a compiled batch-integration core.

The public API of the runtime: symbolic vector fields, the batch integrators and their
errors. Geometry lives in ``nhfast.symbolic``, the example systems in ``nhfast.systems``,
checks on trajectories in ``nhfast.analysis``. The symbolic layers (``nhfast.symbolic``,
``nhfast.codegen``, the vector fields) import without the compiled core; where it is missing
or does not load, the integration names below raise that ``ImportError`` when first used.
"""

from __future__ import annotations

from typing import Any

from nhfast._version import __version__
from nhfast.codegen import IndexedProgram  # noqa: F401
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
from nhfast.structured_field import StructuredVectorField
from nhfast.vectorfield import HamiltonianSystem, LinearSolve, VectorField

try:
    from nhfast import _core  # noqa: F401 - the compiled core, loaded once here
except ImportError as _exc:  # symbolic work goes on without it
    _CORE_ERROR: ImportError | None = _exc
else:
    _CORE_ERROR = None
    from nhfast import hamiltonised as _hamiltonised
    from nhfast import integrate as _integrate

    # re-exported (the names of _NUMERIC)
    from nhfast.hamiltonised import GAUSS_METHODS as GAUSS_METHODS
    from nhfast.hamiltonised import TimeChangedSystem as TimeChangedSystem
    from nhfast.integrate import HAMILTONISED as HAMILTONISED
    from nhfast.integrate import METHODS as METHODS
    from nhfast.integrate import STATUS as STATUS
    from nhfast.integrate import IntegrationResult as IntegrationResult

#: The names that need the compiled core.
_NUMERIC = (
    "integrate",
    "integrate_hamiltonised",
    "IntegrationResult",
    "TimeChangedSystem",
    "METHODS",
    "HAMILTONISED",
    "GAUSS_METHODS",
    "STATUS",
)


def __getattr__(name: str) -> Any:
    if name in _NUMERIC and _CORE_ERROR is not None:
        raise ImportError(
            f"nhfast.{name} needs nhfast's compiled core, which did not load ({_CORE_ERROR}); "
            "reinstall nhfast (a wheel, or from source with a C compiler)"
        ) from _CORE_ERROR
    raise AttributeError(f"module 'nhfast' has no attribute {name!r}")


__all__ = [
    "VectorField",
    "HamiltonianSystem",
    "LinearSolve",
    "StructuredVectorField",
    "integrate",
    "integrate_hamiltonised",
    "IntegrationResult",
    "TimeChangedSystem",
    "METHODS",
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

if _CORE_ERROR is None:
    integrate = _integrate.integrate

    def integrate_hamiltonised(
        system: Any, *args: Any, phi: Any = None, **kwargs: Any
    ) -> IntegrationResult:
        """Integrate a phi-simple Chaplygin system in Hamiltonised form (measure preserving).

        ``system`` (a ChaplyginSystem, ReducedChaplyginSystem, HamiltonisedSystem or
        TimeChangedSystem) is converted by :func:`nhfast.symbolic.time_change.time_changed_system`
        (with ``phi``, when given, instead of the phi-simplicity search); the other arguments are
        those of :func:`nhfast.hamiltonised.integrate_hamiltonised`.

        Parameters
        ----------
        system : ChaplyginSystem, ReducedChaplyginSystem, HamiltonisedSystem or TimeChangedSystem
            The system to integrate.
        *args, **kwargs
            ``x0``, ``t``, ``method``, ``h``, ... of
            :func:`nhfast.hamiltonised.integrate_hamiltonised`.
        phi : sympy.Expr, optional
            The phi of phi-simplicity (checked); default: found by the phi-simplicity search.

        Returns
        -------
        IntegrationResult
            ``y[traj, time, :] = (s, p)`` (see :func:`nhfast.hamiltonised.integrate_hamiltonised`).

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
