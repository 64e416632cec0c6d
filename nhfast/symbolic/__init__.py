"""Pure-SymPy geometry of nonholonomic systems (no compiled code, no example systems).

* :mod:`~nhfast.symbolic.systems` -- ``NonholonomicSystem``, ``ChaplyginSystem``,
  ``ReducedChaplyginSystem``; :mod:`~nhfast.symbolic.liegroup` -- ``LieGroupSystem``.
* :mod:`~nhfast.symbolic.frames` -- Lie brackets, object of anholonomity, projector, K, C.
* :mod:`~nhfast.symbolic.equations` -- almost-Poisson, Hamel and Chaplygin-reduced equations.
* :mod:`~nhfast.symbolic.chaplygin` -- Theta, invariant measure, phi-simplicity, Hamiltonisation.
* :mod:`nhfast.symbolic.vakonomic` -- vakonomic equations, the constraint algorithm and the
  comparison with the nonholonomic equations (a subpackage with its own ``__all__``).

The example systems are in :mod:`nhfast.systems`, which imports this package, never the reverse.
"""

from nhfast.symbolic.chaplygin import (
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
from nhfast.symbolic.equations import (
    EquationsOfMotion,
    almost_poisson_equations,
    chaplygin_equations,
    hamel_equations,
    reduced_almost_poisson,
)
from nhfast.symbolic.frames import (
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
from nhfast.symbolic.liegroup import (
    LieGroupSystem,
    so3_structure_constants,
    son_structure_constants,
)
from nhfast.symbolic.systems import ChaplyginSystem, NonholonomicSystem, ReducedChaplyginSystem
from nhfast.symbolic.time_change import time_changed_system

__all__ = [
    # system classes
    "NonholonomicSystem",
    "ChaplyginSystem",
    "ReducedChaplyginSystem",
    "LieGroupSystem",
    "so3_structure_constants",
    "son_structure_constants",
    # frames
    "lie_bracket",
    "frame_brackets",
    "anholonomity",
    "reduced_metric",
    "bracket_pairings",
    "orthogonal_projector",
    "constraint_coefficients",
    "coefficients_from_pairings",
    "is_skew",
    # equations
    "EquationsOfMotion",
    "almost_poisson_equations",
    "hamel_equations",
    "chaplygin_equations",
    "reduced_almost_poisson",
    # Chaplygin systems: gyroscopic tensor, measure, Hamiltonisation
    "gyroscopic_coefficients",
    "gyroscopic_tensor_vanishes",
    "is_skew_symmetric",
    "theta_form",
    "exterior_derivative",
    "is_closed",
    "integrate_exact_form",
    "MeasureResult",
    "invariant_measure",
    "PhiSimpleResult",
    "phi_simple",
    "HamiltonisedSystem",
    "hamiltonise",
    "reducing_multiplier",
    "reduced_system",
    "time_changed_system",
    "lie_chaplygin_system",
]
