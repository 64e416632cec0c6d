"""Symbolic geometry of nonholonomic systems (SymPy; no example systems).

It describes systems and builds their equations, vector fields and structured programs; it
integrates nothing and imports without the compiled core.

* :mod:`~nhfast.symbolic.systems` -- ``NonholonomicSystem``, ``ChaplyginSystem``,
  ``ReducedChaplyginSystem``; :mod:`~nhfast.symbolic.liegroup` -- ``LieGroupSystem``.
* :mod:`~nhfast.symbolic.frames` -- Lie brackets, object of anholonomity, projector, K, C.
* :mod:`~nhfast.symbolic.equations` -- almost-Poisson, Hamel and Chaplygin-reduced equations.
* :mod:`~nhfast.symbolic.chaplygin` -- Theta, invariant measure, phi-simplicity, Hamiltonisation;
  :mod:`~nhfast.symbolic.time_change` -- the Hamiltonised system as ``tau``-vector fields.
* :mod:`~nhfast.symbolic.lie_chaplygin` -- Chaplygin systems from Lie-algebra data;
  :mod:`~nhfast.symbolic.so3` -- quaternion and Cayley charts of SO(3) with their kinematics.
* :mod:`nhfast.symbolic.rigid_body` -- rigid bodies on SO(n) at matrix level: reduced equations
  derived and lowered to indexed (structured) programs (a subpackage with its own ``__all__``).
* :mod:`nhfast.symbolic.vakonomic` -- vakonomic equations, the constraint algorithm and the
  comparison with the nonholonomic equations (a subpackage with its own ``__all__``).

The example systems are in :mod:`nhfast.systems`, which imports this package, never the reverse.
"""

from nhfast.symbolic.chaplygin import (  # noqa: F401
    HamiltonisedSystem,
    MeasureResult,
    PhiSimpleResult,
    exterior_derivative,
    gyroscopic_coefficients,
    gyroscopic_tensor_vanishes,
    hamiltonise,
    integrate_exact_form,
    invariant_measure,
    is_closed,
    is_skew_symmetric,
    phi_simple,
    reduced_system,
    reducing_multiplier,
    theta_form,
)
from nhfast.symbolic.chaplygin import __all__ as _chaplygin_all
from nhfast.symbolic.equations import (
    EquationsOfMotion,
    almost_poisson_equations,
    chaplygin_equations,
    hamel_equations,
    reduced_almost_poisson,  # noqa: F401
)
from nhfast.symbolic.frames import __all__ as _frames_all
from nhfast.symbolic.frames import (  # noqa: F401
    anholonomity,
    bracket_pairings,
    coefficients_from_pairings,
    constraint_coefficients,
    frame_brackets,
    is_skew,
    lie_bracket,
    orthogonal_projector,
    reduced_metric,
)
from nhfast.symbolic.lie_chaplygin import lie_chaplygin_system
from nhfast.symbolic.liegroup import (  # noqa: F401
    LieGroupSystem,
    so3_structure_constants,
    son_structure_constants,
)
from nhfast.symbolic.liegroup import __all__ as _liegroup_all
from nhfast.symbolic.so3 import so3_chart  # noqa: F401
from nhfast.symbolic.systems import (  # noqa: F401
    ChaplyginSystem,
    NonholonomicSystem,
    ReducedChaplyginSystem,
)
from nhfast.symbolic.systems import __all__ as _systems_all
from nhfast.symbolic.time_change import time_changed_system

#: Names of :mod:`~nhfast.symbolic.chaplygin` used through its own module only.
_CHAPLYGIN_ONLY = ("phi_simple_residuals", "verify_phi")

# Built from the modules' own lists (the imports above re-export them).
__all__ = [
    # system classes
    *_systems_all,
    *_liegroup_all,
    "so3_chart",
    # frames
    *_frames_all,
    # equations
    "EquationsOfMotion",
    "almost_poisson_equations",
    "hamel_equations",
    "chaplygin_equations",
    # Chaplygin systems: gyroscopic tensor, measure, Hamiltonisation
    *(name for name in _chaplygin_all if name not in _CHAPLYGIN_ONLY),
    "time_changed_system",
    "lie_chaplygin_system",
]
