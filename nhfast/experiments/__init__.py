"""Experiments: what ``nhfast run`` and ``nhfast check`` do, as library calls.

* :mod:`~nhfast.experiments.catalogue` -- the examples: systems, parameters, initial-state
  samplers and the sources' claims about invariant measures and Hamiltonisation.
* :mod:`~nhfast.experiments.checks` -- the checks of an example against those claims
  (symbolic and numerical; for instances built in the structured form -- large n, the rigid-body
  engine's inertias -- their structured numerical counterparts); a verdict is agreement with
  the claim.
* :mod:`~nhfast.experiments.runner` -- :func:`run_example`: build, integrate a batch in blocks
  with a progress bar, check, and collect a :class:`~nhfast.analysis.result.Report`.
"""

from nhfast.experiments.catalogue import (
    EXAMPLES,
    Example,
    Expectation,
    Instance,
    MeasureClaim,
    build_example,
    get_example,
)
from nhfast.experiments.checks import (
    discovery_check,
    hamiltonisation_checks,
    measure_checks,
    pointwise_measure_check,
    structured_hamiltonisation_check,
    structured_measure_checks,
    symbolic_checks,
)
from nhfast.experiments.runner import CHECKS, FIXED_STEP_H, integrate_in_chunks, run_example

__all__ = [
    "run_example",
    "CHECKS",
    "FIXED_STEP_H",
    "integrate_in_chunks",
    "EXAMPLES",
    "Example",
    "Instance",
    "Expectation",
    "MeasureClaim",
    "get_example",
    "build_example",
    "symbolic_checks",
    "measure_checks",
    "discovery_check",
    "hamiltonisation_checks",
    "pointwise_measure_check",
    "structured_measure_checks",
    "structured_hamiltonisation_check",
]
