"""check_measure on a body whose reduced metric needs a dense solve (the pairwise inertia):
no generated divergence exists, so Liouville's integral is a Gauss-Legendre quadrature of
``div X`` by differences; it must equal the Liouville field where both exist, and decide the
measure check both ways."""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp
from references.states import sphere_states as _states

from nhfast.analysis import measure
from nhfast.analysis.measure import LogTerm, check_measure
from nhfast.systems import veselova
from nhfast.systems.rigid_bodies import rigid_body_params
from nhfast.vectorfield import VectorField


def test_quadrature_equals_the_liouville_field() -> None:
    """On the physical body (which has a generated divergence) the quadrature route gives
    Liouville's integral of the extra state ``ell' = div X`` to round-off."""
    n = 5
    vf = veselova(n, form="structured", inertia="physical")
    p = rigid_body_params(n, "physical")
    x0, t = _states(n, 4, 0), np.linspace(0.0, 1.0, 11)
    x1, ell1 = measure.liouville_integral(vf, x0, t, p, rtol=1e-12, atol=1e-12)
    x2, ell2 = measure._liouville_by_quadrature(vf, x0, t, p, dict(rtol=1e-12, atol=1e-12))
    np.testing.assert_allclose(x2, x1, atol=1e-13)
    np.testing.assert_allclose(ell2, ell1, atol=1e-12)
    assert np.abs(ell1).max() > 1e-2


@pytest.mark.parametrize(
    "density, holds",
    [(-0.5 * LogTerm("log_det_metric"), True), (None, False),
     (-0.4 * LogTerm("log_det_metric"), False)],
)  # fmt: skip
def test_pairwise_body_measure_is_decided(density, holds) -> None:
    """``(det K_gamma)^(-1/2)``, the density the catalogue checks for the other inertias, is
    invariant for this one too; Lebesgue measure and another power are not."""
    n = 5
    vf = veselova(n, form="structured", inertia="pairwise")
    p = rigid_body_params(n, "pairwise")
    chk = check_measure(vf, density, _states(n, 4, 1), t=1.0, params=p, n_jacobian=0)
    assert chk.holds is holds, chk.statement
    if not holds:
        assert chk.figures["max |defect|"] > 1e4 * chk.figures["threshold"]


def test_lebesgue_control_compiles_no_density_kernel(monkeypatch) -> None:
    """The constant density (the Lebesgue control of a measure check) is evaluated without a
    generated kernel: on a structured field that kernel would be unrolled in ``n``."""

    def refuse(*args, **kwargs):
        raise AssertionError("a density kernel was built for a constant density")

    monkeypatch.setattr(measure, "density_kernel", refuse)
    n = 5
    vf = veselova(n, form="structured", inertia="physical")
    p = rigid_body_params(n, "physical")
    chk = check_measure(vf, None, _states(n, 3, 2), t=1.0, params=p, n_jacobian=0)
    assert chk.holds is False, chk.statement
    assert chk.figures["max |defect|"] > 1e4 * chk.figures["threshold"]


def test_a_negative_constant_density_is_refused() -> None:
    """A constant density is checked for its sign like any other (no kernel, same rule)."""
    x, y, k = sp.symbols("x y k")
    vf = VectorField([x, y], [y, -k * x], params=[k], name="oscillator")
    with pytest.raises(ValueError, match=r"positive and finite on the samples: k - 1 = -0.5"):
        check_measure(vf, k - 1, np.array([[1.0, 0.0]]), t=1.0, params=[0.5])
    ok = check_measure(vf, k + 1, np.array([[1.0, 0.0]]), t=1.0, params=[0.5])
    assert ok.holds is True, ok.statement
