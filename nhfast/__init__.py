"""nhfast: nonholonomic and vakonomic mechanics with a compiled batch-integration core.

The public API of the runtime: symbolic vector fields, the batch integrators and their
errors. Geometry lives in ``nhfast.symbolic``, the example systems in ``nhfast.systems``,
checks on trajectories in ``nhfast.analysis``. ``integrate`` loads the compiled core on first
use.
"""

from __future__ import annotations

from typing import Any

from nhfast import distributed as _distributed
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

integrate = _integrate.integrate


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


# integrate hands a hamiltonised-* method and a run on a cluster to these (a layer above it)
_integrate.HANDOFF["hamiltonised"] = integrate_hamiltonised
_integrate.HANDOFF["client"] = _distributed.integrate_ensemble
