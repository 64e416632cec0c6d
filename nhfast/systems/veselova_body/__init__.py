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

from nhfast.systems.veselova_body.chart import __all__ as _chart_all
from nhfast.systems.veselova_body.chart import veselova  # noqa: F401
from nhfast.systems.veselova_body.embedded import (  # noqa: F401
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
from nhfast.systems.veselova_body.embedded import __all__ as _embedded_all
from nhfast.systems.veselova_body.formulas import default_inertia
from nhfast.systems.veselova_body.lie import __all__ as _lie_all
from nhfast.systems.veselova_body.lie import (  # noqa: F401
    physical_inertia,
    veselova_body_so3,
    veselova_chaplygin,
    veselova_left_trivialised,
)
from nhfast.systems.veselova_body.unreduced import __all__ as _unreduced_all
from nhfast.systems.veselova_body.unreduced import (  # noqa: F401
    embedded_to_unreduced,
    omega_pairs,
    unreduced_to_embedded,
    unreduced_to_gamma,
    veselova_coordinates,
    veselova_unreduced,
)

# Built from the modules' own lists (the imports above re-export them); the embedded
# structured_program stays in its module.
__all__ = [
    *_chart_all,
    *(name for name in _embedded_all if name != "structured_program"),
    *_unreduced_all,
    *_lie_all,
    "default_inertia",
]
