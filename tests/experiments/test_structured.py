"""The structured form of the Veselova example's checks (large n, engine inertias).

Each check is tested against an independent computation: the closed-form Hamiltonian of the
seed inertia (H~ = 1/2 (A^{-1} m~, m~), García-Naranjo & Marrero 2020, Thm 4.3), the
generated divergence of ``veselova(n, form="structured")`` against the flow-map determinant of the
engine's seed body (the same dynamics), and wrong claims that must fail.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from nhfast.experiments import build_example, run_example
from nhfast.experiments.catalogue import STRUCTURED, STRUCTURED_N
from nhfast.experiments.checks import (
    FORM,
    pointwise_measure_check,
    structured_hamiltonisation_check,
    structured_measure_checks,
)

N_SEED = STRUCTURED_N + 1  # the smallest size built in the structured form


@pytest.fixture(scope="module")
def seed_inst():
    return build_example("veselova", N_SEED)


@pytest.fixture(scope="module")
def physical_inst():
    return build_example("veselova", 5, "physical")


def test_forms_by_size_and_inertia():
    assert build_example("veselova", 3).form != STRUCTURED  # symbolic up to STRUCTURED_N
    inst = build_example("veselova", 3, "pairwise")
    assert inst.form == STRUCTURED and inst.chaplygin is None
    assert inst.expected.phi_simple  # n = 3: every inertia is of the seed's form
    with pytest.raises(ValueError, match="inertia: example 'veselova' accepts a-omega-a, physical"):
        build_example("veselova", 5, "spherical")
    with pytest.raises(ValueError, match="inertia: example 'disk' has no inertia option"):
        build_example("disk", None, "physical")


def test_structured_seed_log_density_and_sampler(seed_inst):
    n = N_SEED
    a = seed_inst.params
    np.testing.assert_allclose(a, 1 + np.arange(1, n + 1) / n)
    x = seed_inst.sample(20, seed=4)
    g, m = x[:, :n], x[:, n:]
    np.testing.assert_allclose(np.sum(g * g, axis=1), 1.0, rtol=1e-14)
    np.testing.assert_allclose(np.sum(g * m, axis=1), 0.0, atol=1e-14)
    c = np.sum(a * g**2, axis=1)
    np.testing.assert_allclose(np.sum(m * m / a, axis=1) / (2 * c), 0.5, rtol=1e-13)
    claim = seed_inst.measure_claims[0]
    k = list(seed_inst.vector_field.program.output_names["observables"]).index(claim.observable[0])
    logr = claim.observable[1] * seed_inst.evaluate("observables", x, a)[:, k]
    np.testing.assert_allclose(logr, (2 - n) / 2 * np.log(c), rtol=1e-13)


def test_hamiltonisation_seed_against_the_closed_form_htilde(seed_inst):
    """The tau-field of the seed body is the Hamiltonian field of 1/2 (A^{-1} m~, m~)."""
    from nhfast.experiments.checks import STRUCTURED_SAMPLES

    n, a = N_SEED, seed_inst.params
    chk = structured_hamiltonisation_check(seed_inst, 0, a)
    assert chk.holds and chk.figures["form"] == FORM["structured"]
    assert chk.figures["relative difference ||Y - Z|| / ||Y||"] < 1e-8
    # the same tau-field from the seed's formulas, in closed form (no finite differences)
    x = seed_inst.sample(STRUCTURED_SAMPLES, 2)
    g, m = x[:, :n], x[:, n:]
    c = np.sum(a * g**2, axis=1, keepdims=True)
    mt = m / np.sqrt(c)  # exp(phi) m, phi = -1/2 ln c
    w = mt / a
    gdot_tau = w - np.sum(g * w, axis=1, keepdims=True) * g
    mdot_tau = (
        -np.sum(mt * w, axis=1, keepdims=True) * g + np.sum(g * w, axis=1, keepdims=True) * mt
    )
    X = seed_inst.evaluate("rhs", x, a)
    assert X.shape == x.shape
    # Y = (exp(-phi) gammadot, d/dtau m~ = mdot + X[phi] m) by hand, X[phi] = -X[c] / (2c)
    cdot = 2 * np.sum(a * g * X[:, :n], axis=1, keepdims=True)
    np.testing.assert_allclose(np.sqrt(c) * X[:, :n], gdot_tau, rtol=0, atol=1e-12)
    np.testing.assert_allclose(X[:, n:] - cdot / (2 * c) * m, mdot_tau, rtol=0, atol=1e-12)


def test_hamiltonisation_physical_fails_as_claimed(physical_inst):
    chk = structured_hamiltonisation_check(physical_inst, 0, physical_inst.params)
    assert chk.holds  # agreement: not phi-simple for n >= 4 (digest, O18)
    assert chk.figures["expected"] == "not phi-simple"
    assert chk.figures["relative difference ||Y - Z|| / ||Y||"] > 1e3 * chk.figures["threshold"]


def test_pointwise_measure_check_and_a_wrong_exponent(seed_inst, physical_inst):
    chk = pointwise_measure_check(seed_inst, 0, seed_inst.params)
    assert chk.holds
    # the generated divergence agrees with central differences of the rhs kernel
    assert chk.figures["max |div X (kernel) - div X (differences)|"] < 1e-7
    good = pointwise_measure_check(physical_inst, 0, physical_inst.params)
    assert good.holds
    if "divergence" in physical_inst.vector_field.program.outputs:  # the engine's, generated
        assert good.figures["max |div X (kernel) - div X (differences)|"] < 1e-7
    else:
        assert "central differences" in good.figures["divergence"]
    # det K^(-0.4) instead of det K^(-1/2): the identity fails
    wrong = dataclasses.replace(
        physical_inst.measure_claims[0], observable=("log_det_metric", -0.4), label="wrong"
    )
    bad = dataclasses.replace(
        physical_inst, measure_claims=[wrong, *physical_inst.measure_claims[1:]]
    )
    chk = pointwise_measure_check(bad, 0, bad.params)
    assert chk.holds is False
    assert chk.figures["relative residual ||X[log rho] + div X|| / ||div X||"] > 1e-2


def test_flow_map_route_against_the_seed_density():
    """The pairwise inertia with H = a a^T is the seed body (I(Om)_ij = a_i a_j Om_ij): the
    volume change of its flow, log det DPhi_t by central differences (the Lebesgue control's
    defect), is -Delta log rho for the seed's rho = (A gamma, gamma)^((2-n)/2) (Thm 4.3)."""
    import nhfast as nh

    n = 3
    inst = build_example("veselova", n, "pairwise")
    a = 1 + np.arange(1, n + 1) / n
    H = np.outer(a, a).ravel()
    x0 = inst.sample(2, seed=5)  # on the constraint manifold (the energy does not matter)
    chk = structured_measure_checks(inst, x0, 1.0, H, 1e-10, 1e-12, 1)
    assert "central differences" in chk[1].figures["volume change"]
    assert chk[0].holds and chk[1].holds  # det K^(-1/2) invariant, Lebesgue not
    res = nh.integrate(inst.vector_field, x0, [0.0, 1.0], params=H, rtol=1e-13, atol=1e-14)
    c = np.sum(a * res.y[:, :, :n] ** 2, axis=2)
    expect = (n - 2) / 2 * np.log(c[:, -1] / c[:, 0])  # -(log rho(x_1) - log rho(x_0))
    assert np.all(np.abs(expect) > 1e-3)
    np.testing.assert_allclose(chk[1].samples["final defect"], expect, rtol=0, atol=1e-6)


@pytest.mark.slow
def test_flow_map_determinant_matches_liouville_integral(physical_inst):
    """Two routes to the volume change, on the same body: the pairwise inertia with
    H_ij = j_i + j_j is the physical one, solved densely (no divergence output: log det DPhi_t
    by central differences of the flow), the physical one has a generated divergence
    (Liouville's integral; else differences too)."""
    pairwise = build_example("veselova", 5, "pairwise")
    assert "divergence" not in pairwise.vector_field.program.outputs
    x0 = physical_inst.sample(2, seed=5)
    ref = structured_measure_checks(physical_inst, x0, 1.0, physical_inst.params, 1e-10, 1e-12, 1)
    fd = structured_measure_checks(pairwise, x0, 1.0, pairwise.params, 1e-10, 1e-12, 1)
    assert "central differences" in fd[0].figures["volume change"]
    for a_chk, b_chk in zip(ref, fd, strict=True):
        assert a_chk.holds and b_chk.holds
    # the Lebesgue control's defect is the volume change itself: ell(t) = log det DPhi_t
    d_ref = ref[1].samples["final defect"]
    d_fd = fd[1].samples["final defect"]
    assert np.all(np.abs(d_ref) > 1e-3)
    np.testing.assert_allclose(d_fd, d_ref, rtol=0, atol=1e-6)


def test_run_physical_every_check_structured(capsys):
    # without the trajectory measure checks (no second library; the CLI test runs them)
    checks = ("drift", "symbolic", "hamiltonisation")
    report, _ = run_example(
        "veselova", n=5, lanes=8, t_end=1.0, threads=1, inertia="physical", log=print, checks=checks
    )
    out = capsys.readouterr().out
    assert "building veselova (n = 5) ..." in out and "done in" in out
    names = [c.name for c in report.checks]
    assert len(names) == 4 and all(c.holds for c in report.checks)
    assert all("(structured numeric" in s for s in names)
    assert all(c.figures["form"] == FORM["structured"] for c in report.checks)
    assert report.settings["inertia"] == "physical"
    assert "build (structured program)" in report.timings
