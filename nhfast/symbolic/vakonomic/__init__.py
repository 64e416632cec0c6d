"""Vakonomic mechanics and its comparison with nonholonomic mechanics (pure SymPy).

* :mod:`~nhfast.symbolic.vakonomic._forms` -- constraint 1-forms, integrability, symbols and the
  one multiplier sign convention (read it first).
* :mod:`~nhfast.symbolic.vakonomic.equations` -- vakonomic equations in coordinates and in an
  adapted frame.
* :mod:`~nhfast.symbolic.vakonomic.constraint_algorithm` -- Dirac-Bergmann, ``h_2`` on ``M_2``,
  the Dirac and vakonomic brackets.
* :mod:`~nhfast.symbolic.vakonomic.nh_vs_vak` -- is every nonholonomic trajectory vakonomic
  (coordinate route); :mod:`~nhfast.symbolic.vakonomic.consistency` -- the frame route.
* :mod:`~nhfast.symbolic.vakonomic.noninvariant` -- seed 000's own route: the variation (3.1),
  the tensors R, B, FL, HL of a non-invariant Chaplygin system, Lemma 4.6, (4.16), Thm. 4.8(b);
  Sec. 5 on Lie groups, (5.3), (5.6), (5.8)-(5.10).
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
    hamel_field,
    restriction_test,
    vakonomic_frame_field,
)
from nhfast.symbolic.vakonomic.constraint_algorithm import (
    ConstraintAlgorithmResult,
    PresymplecticForm,
    SODEMultiplierRates,
    VakonomicHamiltonian,
    dirac_bergmann,
    poisson_bracket,
    presymplectic_form,
    sode_multiplier_rates,
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
from nhfast.symbolic.vakonomic.noninvariant import (
    ChaplyginBundle,
    IntegralCriterion,
    LeftInvariantConstraint,
    admissible_pair_residuals,
    admissible_variation,
    chaplygin_bundle,
    coordinate_multipliers,
    euler_poincare_suslov,
    generator_equation,
    integral_criterion,
    left_invariant_constraint,
    lie_generator_equation,
    lie_integral_criterion_integrands,
    lie_vakonomic_equations,
    multiplier_equation,
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
    "PresymplecticForm",
    "presymplectic_form",
    "SODEMultiplierRates",
    "sode_multiplier_rates",
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
    "hamel_field",
    "vakonomic_frame_field",
    # seed 000's own route: non-invariant Chaplygin systems (Lemma 4.6, (4.16), Thm. 4.8(b))
    "admissible_variation",
    "ChaplyginBundle",
    "chaplygin_bundle",
    "generator_equation",
    "multiplier_equation",
    "coordinate_multipliers",
    "IntegralCriterion",
    "integral_criterion",
    "admissible_pair_residuals",
    "LeftInvariantConstraint",
    "left_invariant_constraint",
    "lie_generator_equation",
    "lie_integral_criterion_integrands",
    "euler_poincare_suslov",
    "lie_vakonomic_equations",
]
