"""nhfast: nonholonomic and vakonomic mechanics with a compiled batch-integration core.

The symbolic layers (``nhfast.symbolic``, ``nhfast.codegen``) import without the compiled
core; ``integrate`` loads it on first use.
"""

from nhfast.errors import BackendWarning, CompilationError, IntegrationError, IntegrationWarning
from nhfast.hamiltonised import integrate_hamiltonised
from nhfast.integrate import HAMILTONISED, METHODS, STATUS, IntegrationResult, integrate
from nhfast.vectorfield import HamiltonianSystem, LinearSolve, VectorField

__version__ = "0.1.0"

__all__ = [
    "VectorField",
    "HamiltonianSystem",
    "LinearSolve",
    "integrate",
    "integrate_hamiltonised",
    "HAMILTONISED",
    "IntegrationResult",
    "METHODS",
    "STATUS",
    "CompilationError",
    "IntegrationError",
    "IntegrationWarning",
    "BackendWarning",
    "__version__",
]
