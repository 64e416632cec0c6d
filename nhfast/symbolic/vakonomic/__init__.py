"""Vakonomic mechanics and its comparison with nonholonomic mechanics (pure SymPy).

* :mod:`~nhfast.symbolic.vakonomic._forms` -- constraint 1-forms, integrability, symbols and the
  one multiplier sign convention (read it first).
* :mod:`~nhfast.symbolic.vakonomic.equations` -- vakonomic equations in coordinates and in an
  adapted frame.
* :mod:`~nhfast.symbolic.vakonomic.constraint_algorithm` -- Dirac-Bergmann, ``h_2`` on ``M_2``,
  the Dirac and vakonomic brackets.
* :mod:`~nhfast.symbolic.vakonomic.nh_vs_vak` -- is every nonholonomic trajectory vakonomic
  (coordinate route); :mod:`~nhfast.symbolic.vakonomic.consistency` -- the frame route.
"""

from nhfast.symbolic.vakonomic._forms import (
    SymbolicVerdict,
    constraint_one_forms,
    frame_to_coordinate_multipliers,
    is_integrable,
    multiplier_symbols,
    velocity_symbols,
)
from nhfast.symbolic.vakonomic.consistency import (
    FrameData,
    consistency_test,
    frame_data,
    restriction_test,
)
from nhfast.symbolic.vakonomic.constraint_algorithm import (
    ConstraintAlgorithmResult,
    VakonomicHamiltonian,
    dirac_bergmann,
    poisson_bracket,
    vakonomic_hamiltonian,
    vakonomic_hamiltonian_field,
)
from nhfast.symbolic.vakonomic.equations import (
    FrameVakonomicEquations,
    SolveMode,
    nonholonomic_coordinate_equations,
    vakonomic_equations,
    vakonomic_frame_equations,
)
from nhfast.symbolic.vakonomic.nh_vs_vak import (
    NonholonomicData,
    nonholonomic_data,
    unconstrained_test,
    vakonomic_is_nonholonomic,
    vakonomic_residual,
    vakonomic_test,
)

__all__ = [
    # the one convention: forms, integrability, symbols, multiplier conversion
    "constraint_one_forms",
    "is_integrable",
    "velocity_symbols",
    "multiplier_symbols",
    "frame_to_coordinate_multipliers",
    "SymbolicVerdict",
    # equations
    "SolveMode",
    "vakonomic_equations",
    "nonholonomic_coordinate_equations",
    "FrameVakonomicEquations",
    "vakonomic_frame_equations",
    # constraint algorithm
    "poisson_bracket",
    "dirac_bergmann",
    "ConstraintAlgorithmResult",
    "VakonomicHamiltonian",
    "vakonomic_hamiltonian",
    "vakonomic_hamiltonian_field",
    # nonholonomic versus vakonomic, coordinate route
    "NonholonomicData",
    "nonholonomic_data",
    "unconstrained_test",
    "vakonomic_test",
    "vakonomic_residual",
    "vakonomic_is_nonholonomic",
    # frame route
    "FrameData",
    "frame_data",
    "consistency_test",
    "restriction_test",
]
