"""The Veselova rigid body on SO(n) (García-Naranjo & Marrero 2020, Section 4.2), in all its forms.

* :mod:`~nhfast.systems.veselova_body.formulas` -- ``c = (A gamma, gamma)``, ``K``, ``C``, ``phi``,
  the invariant density, the parameter symbols: each formula once;
* :mod:`~nhfast.systems.veselova_body.chart` -- the reduced system in the hemisphere chart;
* :mod:`~nhfast.systems.veselova_body.embedded` -- the whole sphere in ``R^{2n}`` (one indexed
  program; looped or unrolled kernels) and the maps to and from the chart;
* :mod:`~nhfast.systems.veselova_body.unreduced` -- ``SO(n) x so(n)`` with a multiplier, and
  ``SO(n)`` in coordinates;
* :mod:`~nhfast.systems.veselova_body.lie` -- the reduced data from the Lie algebra, and the
  body equations on ``so(3)``.
"""

from nhfast.systems.veselova_body.chart import veselova
from nhfast.systems.veselova_body.embedded import (
    VESELOVA_OBSERVABLES,
    chart_to_embedded,
    embedded_momentum,
    embedded_to_chart,
    embedded_velocity,
    join_state,
    project_to_constraints,
    split_state,
    veselova_embedded,
    veselova_structured,
)
from nhfast.systems.veselova_body.formulas import default_inertia
from nhfast.systems.veselova_body.lie import (
    physical_inertia,
    veselova_body_so3,
    veselova_chaplygin,
    veselova_left_trivialised,
)
from nhfast.systems.veselova_body.unreduced import (
    embedded_to_unreduced,
    omega_pairs,
    unreduced_to_embedded,
    unreduced_to_gamma,
    veselova_coordinates,
    veselova_unreduced,
)

__all__ = [
    "veselova",
    "veselova_embedded",
    "veselova_structured",
    "veselova_unreduced",
    "veselova_coordinates",
    "veselova_left_trivialised",
    "veselova_chaplygin",
    "physical_inertia",
    "veselova_body_so3",
    "VESELOVA_OBSERVABLES",
    "default_inertia",
    "chart_to_embedded",
    "embedded_to_chart",
    "embedded_velocity",
    "embedded_momentum",
    "split_state",
    "join_state",
    "project_to_constraints",
    "omega_pairs",
    "embedded_to_unreduced",
    "unreduced_to_gamma",
    "unreduced_to_embedded",
]
