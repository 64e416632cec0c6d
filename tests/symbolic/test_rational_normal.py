"""The gcd-free rational normal form of :mod:`nhfast.symbolic._rational` is exact."""

from __future__ import annotations

import random

import pytest
import sympy as sp

from nhfast.symbolic._rational import derivative, normal, numerator_denominator

x, y, z = sp.symbols("x y z", real=True)
a = sp.Symbol("a", positive=True)


def _random_rational(rng: random.Random, depth: int = 2) -> sp.Expr:
    if depth == 0:
        return rng.choice([x, y, z, a, sp.Rational(rng.randint(-5, 5), rng.randint(1, 4))])
    u, v = _random_rational(rng, depth - 1), _random_rational(rng, depth - 1)
    op = rng.randrange(4)
    if op == 0:
        return u + v
    if op == 1:
        return u * v
    if op == 2:
        return u - v * x
    den = sp.expand(v**2 + 1 + x**2)  # never zero on the reals
    return u / den


def _equal(u: sp.Expr, v: sp.Expr, rng: random.Random) -> bool:
    """Exactly equal at five random rational points (rational functions of degree < 100 that
    differ are unequal at such points but for a set of measure zero)."""
    for _ in range(5):
        pt = {s: sp.Rational(rng.randint(-40, 40), rng.randint(1, 17)) for s in (x, y, z)}
        pt[a] = sp.Rational(rng.randint(1, 40), rng.randint(1, 17))
        if u.xreplace(pt) != v.xreplace(pt):
            return False
    return True


@pytest.mark.parametrize("seed", range(12))
def test_normal_and_derivative_are_the_same_functions(seed: int) -> None:
    rng = random.Random(seed)
    e = _random_rational(rng) + _random_rational(rng) / (y**2 + 2)
    f = normal(e)
    assert _equal(f, e, rng)
    assert not _equal(f, e + x / (y**2 + 3), rng)  # the comparison can fail
    num, den = numerator_denominator(e)
    assert _equal(num / den, e, rng)
    assert num == sp.expand(num)
    for s in (x, y, a):
        assert _equal(derivative(e, s), sp.diff(e, s), rng)


def test_normal_finds_zero_and_keeps_denominators_as_factors() -> None:
    d = sp.expand((x + y) ** 3 + z)
    e = x / d - (x**2 + x * y) / (d * (x + y)) + 1 / (2 * d) - (x + y) / (2 * d * (x + y))
    assert normal(e) == 0
    f = normal(x / d + y / d**2)
    num, den = sp.fraction(f)
    assert num == sp.expand(x * d + y)
    assert den == d**2  # the factor, not its expanded square
    # a sign or constant factor of a denominator is moved to the numerator
    assert normal(1 / (-2 * d) + 1 / (2 * d)) == 0


def test_a_square_root_goes_through_the_expression_route() -> None:
    w = sp.sqrt(1 - x**2)
    e = x / (w + 1) + w / (x**2 + 1)
    assert sp.simplify(normal(e) - e) == 0
    assert sp.simplify(derivative(e, x) - sp.diff(e, x)) == 0
    assert normal(w * w - 1 + x**2) == 0
    with pytest.raises(ZeroDivisionError):
        normal(1 / (x * (y + 1) - x * y - x + 0 * z) + y / (x + 1))
