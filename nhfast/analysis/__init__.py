"""Checks on sampled trajectories: invariant measures, Hamiltonisation, drift, reports.

Submodules, each with one job:

* :mod:`~nhfast.analysis.sampling` -- initial states in a box or on an energy shell, on the
  constraint manifold and inside the chart.
* :mod:`~nhfast.analysis.measure` -- ``check_measure``: the defect
  ``log rho(x(t)) + ell(t) - log rho(x(0))`` along trajectories, with flow-map determinants
  (``flow_jacobian``: the variational equations, tangent columns stepping with their base;
  ``flow_map_determinant``: on a constraint manifold, with an error estimate);
  candidate densities as structured expressions (``LogTerm``, ``LogDensity``).
* :mod:`~nhfast.analysis.density` -- ``discover_density``: fit sigma from ``X[sigma] = -div X``
  (SymPy basis functions or structured ``LogTerm`` candidates).
* :mod:`~nhfast.analysis.hamiltonisation` -- phi-simplicity (symbolic and on samples),
  conformal closedness, the Hamiltonised flow (Htilde, symplecticity, orbits).
* :mod:`~nhfast.analysis.drift` -- energy error and constraint residual of a run.
* :mod:`~nhfast.analysis.vakonomic_flow` -- vakonomic flows and NH/VAK side by side.
* :mod:`~nhfast.analysis.nh_vs_vak` -- is a nonholonomic trajectory vakonomic
  (``nonholonomic_is_vakonomic``, its routes an argument), and back.
* :mod:`~nhfast.analysis.report` -- text table, JSON, PNG plots of a :class:`Report`.

The names below are loaded on first use, so importing this package stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

from nhfast.analysis.result import Check, Report, jsonable  # noqa: F401

_LAZY = {
    "check_measure": "measure",
    "LogTerm": "measure",
    "LogDensity": "measure",
    "flow_jacobian": "measure",
    "flow_map_determinant": "measure",
    "FlowMapDeterminant": "measure",
    "discover_density": "density",
    "DensityFit": "density",
    "sample_box": "sampling",
    "sample_energy_shell": "sampling",
    "check_states": "sampling",
    "project_to_constraints": "sampling",
    "phi_simplicity": "hamiltonisation",
    "phi_simplicity_on_samples": "hamiltonisation",
    "conformal_closedness": "hamiltonisation",
    "hamiltonised_flow_checks": "hamiltonisation",
    "hamiltonisation_report": "hamiltonisation",
    "energy_error": "drift",
    "constraint_residual": "drift",
    "integrate_vakonomic": "vakonomic_flow",
    "integrate_nonholonomic": "vakonomic_flow",
    "compare_nonholonomic_vakonomic": "vakonomic_flow",
    "nonholonomic_is_vakonomic": "nh_vs_vak",
    "render_text": "report",
}

__all__ = [
    "Check",
    "Report",
    "check_measure",
    "flow_jacobian",
    "flow_map_determinant",
    "FlowMapDeterminant",
    "discover_density",
    "DensityFit",
    "sample_box",
    "sample_energy_shell",
    "project_to_constraints",
    "phi_simplicity",
    "conformal_closedness",
    "hamiltonisation_report",
    "energy_error",
    "constraint_residual",
    "integrate_vakonomic",
    "compare_nonholonomic_vakonomic",
    "nonholonomic_is_vakonomic",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        mod = importlib.import_module(f"nhfast.analysis.{_LAZY[name]}")
        return getattr(mod, name)
    raise AttributeError(f"module 'nhfast.analysis' has no attribute {name!r}")
