"""Chaplygin's reducing multiplier (r = 2) from the invariant measure."""

from __future__ import annotations

import pytest
import sympy as sp

from nhfast.symbolic.chaplygin import phi_simple, reducing_multiplier
from nhfast.systems import chaplygin_sleigh, nonholonomic_particle, veselova


def _differ_by_constant(a: sp.Expr, b: sp.Expr, s) -> bool:
    return all(sp.simplify(sp.diff(a - b, x)) == 0 for x in s)


def test_veselova_3_multiplier_is_the_seed_phi():
    """Seed 004 (4.16): phi = -1/2 ln(A gamma, gamma) for n = 3 (r = 2)."""
    V = veselova(3)
    ham = reducing_multiplier(V)
    a1, a2, a3 = V.params
    s1, s2 = V.s
    c = a3 + (a1 - a3) * s1**2 + (a2 - a3) * s2**2
    assert _differ_by_constant(ham.phi, -sp.log(c) / 2, V.s)
    assert _differ_by_constant(ham.phi, phi_simple(V).phi, V.s)


def test_particle_without_a_has_a_multiplier():
    red = nonholonomic_particle(a=0).reduce()
    ham = reducing_multiplier(red)
    assert _differ_by_constant(ham.phi, phi_simple(red).phi, red.s)


def test_no_multiplier_without_measure_or_with_wrong_rank():
    with pytest.raises(ValueError, match="no basic invariant measure"):
        reducing_multiplier(chaplygin_sleigh().reduce())
    with pytest.raises(ValueError, match="needs rank r = 2, got r = 3"):
        reducing_multiplier(veselova(4))


def test_phi_has_no_removable_singularity_in_the_parameters():
    """Unsimplified integration gave (a3 - a1) log c / (2 (a1 - a3)): NaN at a1 = a3."""
    V = veselova(3)
    phi = phi_simple(V, simplify=False).phi
    a1, a2, a3 = V.params
    s1, s2 = V.s
    val = phi.subs({a1: 2, a2: 3, a3: 2, s1: sp.Rational(1, 3), s2: sp.Rational(1, 4)})
    ref = -sp.log(2 + (3 - 2) * sp.Rational(1, 16)) / 2
    assert sp.simplify(val - ref) == 0
