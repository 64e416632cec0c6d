"""Checks against the sources' claims: each verdict is agreement with the claim, so a true
claim PASSes and a deliberately wrong one FAILs (García-Naranjo & Marrero 2020, Thm 4.3 and
Section 4.1)."""

from __future__ import annotations

import dataclasses

import pytest
import sympy as sp

from nhfast.experiments import (
    Expectation,
    MeasureClaim,
    build_example,
    discovery_check,
    measure_checks,
    symbolic_checks,
)


def test_measure_claims_verdict_is_agreement_with_the_claim():
    """A density that is not invariant PASSes when claimed not invariant and FAILs otherwise."""
    inst = build_example("particle")  # a = 1/2: ds dp is not invariant (Theta != 0)
    x0 = inst.sample(4, 0)
    inst.measure_claims = [
        MeasureClaim(sp.Integer(1), False, "L-", "true claim"),
        MeasureClaim(sp.Integer(1), True, "L+", "false claim"),
    ]
    right, wrong = measure_checks(inst, x0, 1.0, inst.params, 1e-10, 1e-12, 1)
    assert right.holds is True and "not invariant, as expected (true claim)" in right.statement
    assert wrong.holds is False and "not invariant, but expected invariant" in wrong.statement
    assert right.figures["max |defect|"] > 1e3 * right.figures["threshold"]


def test_density_discovery_verdict_against_the_claims():
    inst = build_example("particle-a0")
    ok = discovery_check(inst, 0, None)
    assert ok.holds is True and "equal to the claimed density (1 + y^2)^(-1/2)" in ok.statement
    # a wrong density claim: the fit (1 + y^2)^(-1/2) is not (1 + y^2)^(-1) up to a factor
    y = inst.vector_field.states[1]
    inst.log_density = -sp.log(1 + y**2)
    wrong = discovery_check(inst, 0, None)
    assert wrong.holds is False and "but it differs from the claimed density" in wrong.statement
    # a wrong existence claim
    inst.expected = dataclasses.replace(inst.expected, basic_measure=False)
    assert "but expected none" in discovery_check(inst, 0, None).statement


@pytest.mark.parametrize("name", ["particle", "particle-a0", "disk", "sleigh"])
def test_symbolic_checks_agree_with_the_seeds(name):
    checks = symbolic_checks(build_example(name))
    assert [c.name for c in checks] == [
        "basic invariant measure (symbolic)",
        "phi-simple, Hamiltonisable (symbolic)",
    ]
    assert all(c.holds is True for c in checks), [c.statement for c in checks]


def test_symbolic_checks_veselova_3():
    checks = symbolic_checks(build_example("veselova", 3))
    assert all(c.holds is True for c in checks)
    assert "-1/2 ln (A gamma, gamma)" in checks[0].statement  # (2-n)/2 with n = 3


def test_symbolic_check_fails_on_a_wrong_claim():
    # the digest's misprint trap: exponent +(n-2)/2 instead of (2-n)/2 must be rejected; and
    # a claim "not phi-simple" for a phi-simple system must be rejected too
    inst = build_example("veselova", 3)
    c = inst.chaplygin.extra["c"]
    inst.expected = Expectation(True, sp.log(c) / 2, False, None, "a wrong claim")
    measure, phi = symbolic_checks(inst)
    assert measure.holds is False and "disagrees with a wrong claim" in measure.statement
    assert phi.holds is False and "disagrees with a wrong claim: phi-simple" in phi.statement
