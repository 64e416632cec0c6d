"""The Veselova rigid body on SO(n) (García-Naranjo & Marrero 2020, Section 4.2): one model.

:func:`veselova` builds it in the form a computation needs (``form=``, see :data:`FORMS`) with
a named inertia (``inertia=``, :data:`nhfast.systems.inertia.INERTIAS`).  The modules:

* :mod:`~nhfast.systems.veselova_body.formulas` -- ``c = (A gamma, gamma)``, ``K``, ``C``, ``phi``,
  the invariant density, the parameter symbols: each formula once;
* :mod:`~nhfast.systems.veselova_body.chart` -- the reduced system in the hemisphere chart;
* :mod:`~nhfast.systems.veselova_body.embedded` -- the whole sphere in ``R^{2n}`` (one indexed
  program; looped or unrolled kernels) and the maps to and from the chart;
* :mod:`~nhfast.systems.veselova_body.unreduced` -- ``SO(n) x so(n)`` with a multiplier, and
  ``SO(n)`` in coordinates, with the maps from the embedded states;
* :mod:`~nhfast.systems.veselova_body.lie` -- the reduced data from the Lie algebra, and the
  body equations on ``so(3)``;
* :mod:`~nhfast.systems.veselova_body.model` -- :func:`veselova`, which picks among them.

Reference: García-Naranjo & Marrero (2020), "The geometry of nonholonomic Chaplygin systems
revisited".
"""

from nhfast.systems.veselova_body.embedded import (
    VESELOVA_OBSERVABLES,  # noqa: F401
    chart_to_embedded,
    embedded_momentum,  # noqa: F401
    embedded_to_chart,
    embedded_velocity,  # noqa: F401
    join_state,  # noqa: F401 (array helpers, not in __all__)
    project_to_constraints,
    split_state,  # noqa: F401
)
from nhfast.systems.veselova_body.formulas import default_inertia  # noqa: F401
from nhfast.systems.veselova_body.model import FORMS, veselova  # noqa: F401
from nhfast.systems.veselova_body.unreduced import (
    embedded_to_unreduced,
    omega_pairs,  # noqa: F401
    unreduced_to_embedded,  # noqa: F401
    unreduced_to_gamma,  # noqa: F401
)

__all__ = [
    "veselova",
    "chart_to_embedded",
    "embedded_to_chart",
    "project_to_constraints",
    "embedded_to_unreduced",
]
