"""Experiments: what ``nhfast run`` and ``nhfast check`` do, as library calls.

* :mod:`~nhfast.experiments.catalogue` -- the examples: systems, parameters, initial-state
  samplers and the sources' claims about invariant measures and Hamiltonisation.
* :mod:`~nhfast.experiments.checks` -- the checks of an example against those claims
  (symbolic and numerical; for instances built in the structured form -- large n, the rigid-body
  engine's inertias -- their structured numerical counterparts); a verdict is agreement with
  the claim.
* :mod:`~nhfast.experiments.runner` -- :func:`run_example`: build, integrate a batch in blocks
  with a progress bar, check, and collect a :class:`~nhfast.analysis.result.Report`
  (:func:`run_instance` for a system already built).
* :mod:`~nhfast.experiments.spec` -- :class:`SystemSpec`: a user's own system and its claims,
  in the form the checks need; :mod:`~nhfast.experiments.user` loads one from
  ``FILE.py:FACTORY`` (``nhfast run FILE.py:FACTORY``).
"""

from nhfast.experiments.catalogue import (
    EXAMPLES,  # noqa: F401
    Example,
    Expectation,  # noqa: F401
    Instance,
    MeasureClaim,  # noqa: F401
    build_example,
    get_example,
)
from nhfast.experiments.checks import (
    discovery_check,  # noqa: F401
    hamiltonisation_checks,  # noqa: F401
    measure_checks,  # noqa: F401
    pointwise_measure_check,  # noqa: F401
    structured_hamiltonisation_check,  # noqa: F401
    structured_measure_checks,  # noqa: F401
    symbolic_checks,  # noqa: F401
)
from nhfast.experiments.runner import (  # noqa: F401
    CHECKS,
    FIXED_STEP_H,
    integrate_in_chunks,
    run_example,
    run_instance,
)
from nhfast.experiments.spec import SystemSpec, to_instance  # noqa: F401

__all__ = [
    "run_example",
    "SystemSpec",
    "Example",
    "Instance",
    "get_example",
    "build_example",
]
