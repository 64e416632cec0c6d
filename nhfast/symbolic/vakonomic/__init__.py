"""Vakonomic mechanics and its comparison with nonholonomic mechanics (pure SymPy).

* :mod:`~nhfast.symbolic.vakonomic._forms` -- constraint 1-forms, integrability, symbols and the
  one multiplier sign convention (read it first).
* :mod:`~nhfast.symbolic.vakonomic.equations` -- vakonomic equations in coordinates and in an
  adapted frame.
* :mod:`~nhfast.symbolic.vakonomic.constraint_algorithm` -- Dirac-Bergmann, ``h_2`` on ``M_2``,
  the Dirac and vakonomic brackets.
* :mod:`~nhfast.symbolic.vakonomic.nh_vs_vak` -- is every nonholonomic trajectory vakonomic
  (coordinate route); :mod:`~nhfast.symbolic.vakonomic.consistency` -- the frame route.
* :mod:`~nhfast.symbolic.vakonomic.noninvariant` -- the own route of Jóźwikowski & Respondek
  (2019): the variation (3.1), the tensors R, B, FL, HL of a non-invariant Chaplygin system,
  Lemma 4.6, (4.16), Thm. 4.8(b); Sec. 5 on Lie groups, (5.3), (5.6), (5.8)-(5.10).

References: Jóźwikowski & Respondek (2019), "A comparison of vakonomic and nonholonomic dynamics
with applications to non-invariant Chaplygin systems"; Crampin & Mestdag (2010), "Anholonomic
frames in constrained dynamics"; Mestdag & Crampin (2010), "Nonholonomic systems as restricted
Euler-Lagrange systems"; Martínez, Cortés & de León (2000), "The geometrical theory of
constraints applied to the dynamics of vakonomic mechanical systems: the vakonomic bracket".
"""

from nhfast.symbolic.vakonomic._forms import (  # noqa: F401
    SymbolicVerdict,
    constraint_one_forms,
    frame_to_coordinate_multipliers,
    is_integrable,
    multiplier_symbols,
    velocity_symbols,
)
from nhfast.symbolic.vakonomic._forms import __all__ as _forms_all
from nhfast.symbolic.vakonomic.consistency import (  # noqa: F401
    FrameData,
    consistency_test,
    frame_data,
    hamel_field,
    restriction_test,
    vakonomic_frame_field,
)
from nhfast.symbolic.vakonomic.consistency import __all__ as _consistency_all
from nhfast.symbolic.vakonomic.constraint_algorithm import (  # noqa: F401
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
from nhfast.symbolic.vakonomic.constraint_algorithm import __all__ as _algorithm_all
from nhfast.symbolic.vakonomic.equations import (  # noqa: F401
    FrameVakonomicEquations,
    SolveMode,
    nonholonomic_coordinate_equations,
    vakonomic_equations,
    vakonomic_frame_equations,
)
from nhfast.symbolic.vakonomic.equations import __all__ as _equations_all
from nhfast.symbolic.vakonomic.nh_vs_vak import (  # noqa: F401
    NonholonomicData,
    nonholonomic_data,
    unconstrained_test,
    vakonomic_is_nonholonomic,
    vakonomic_residual,
    vakonomic_test,
)
from nhfast.symbolic.vakonomic.nh_vs_vak import __all__ as _nh_vs_vak_all
from nhfast.symbolic.vakonomic.noninvariant import (  # noqa: F401
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
from nhfast.symbolic.vakonomic.noninvariant import __all__ as _noninvariant_all

# The imports above re-export each module's ``__all__``; the list is built from those lists.
__all__ = [
    # the one convention: forms, integrability, symbols, multiplier conversion
    *_forms_all,
    # equations
    *_equations_all,
    # constraint algorithm
    *_algorithm_all,
    # nonholonomic versus vakonomic, coordinate route
    *_nh_vs_vak_all,
    # frame route
    *_consistency_all,
    # Jóźwikowski & Respondek (2019)'s own route: non-invariant Chaplygin systems
    # (Lemma 4.6, (4.16), Thm. 4.8(b))
    *_noninvariant_all,
]
