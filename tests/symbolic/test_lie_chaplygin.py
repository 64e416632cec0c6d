"""Chaplygin systems from Lie-algebra data (lie_chaplygin_system) against seed 004, Section 4.2.

Independent references: the closed forms (4.12)/(4.14) of ``formulas.py`` for ``I = A Omega A``;
for any inertia, Lemma 4.5 (``[X_i, X_j] = u_i ^ u_j``, inertia-free) and ``B_ijl =
(I(u_i ^ u_j), X_l)_kappa`` formed here, so that ``C K = B`` checks bracket and solve; ``K``
formed here from ``-1/2 tr(I(X_k) X_l)``.
"""

from __future__ import annotations

import itertools

import pytest
import sympy as sp

from nhfast.symbolic.lie_chaplygin import lie_chaplygin_system, pairings_solution
from nhfast.systems import veselova
from nhfast.systems.veselova_body import formulas as F


def _lemma_4_5_data(n: int, inertia):  # noqa: ANN001, ANN202
    """``X_k``, ``u_k`` and the inertia-free bracket of Lemma 4.5, in the chart (4.9)."""
    s = F.chart_symbols(n)
    g = sp.Matrix(F.hemisphere_gamma(s))
    e = sp.eye(n)
    u = [e[:, i] - g[i] / g[-1] * e[:, n - 1] for i in range(n - 1)]
    X = [F.wedge(g, ui) for ui in u]
    return s, X, u


@pytest.mark.parametrize("n", [3, 4])
def test_special_inertia_reproduces_4_12_and_4_14(n: int) -> None:
    # n = 3: symbolic a; n = 4: rational a (exact identities in s)
    if n == 3:
        red = veselova(3, form="lie-algebra")
        a = red.params
    else:
        a = [sp.Integer(1), sp.Integer(2), sp.Rational(7, 2), sp.Integer(5)]
        A = sp.diag(*a)
        red = veselova(4, form="lie-algebra", inertia=lambda Om: A * Om * A, params=[])
    s, r = red.s, n - 1
    K, C = F.reduced_metric(s, a), F.gyroscopic_coefficients(s, a)
    for k, m in itertools.product(range(r), repeat=2):
        assert sp.cancel(sp.expand(red.K[k, m] - K[k, m])) == 0
    for i, j, k in itertools.product(range(r), repeat=3):
        assert sp.cancel(sp.expand(red.C[i, j, k] - C[i, j, k])) == 0


def test_action_and_plain_derivative_agree_and_non_lifts_are_rejected() -> None:
    # X_i[Z] = dZ/ds_i (pi_* X_i = d/ds_i) vs Y[gamma] = -Y gamma (Lemma B.2): same system
    n = 3
    a = [sp.Integer(1), sp.Integer(3), sp.Integer(4)]
    A = sp.diag(*a)
    s, X, _ = _lemma_4_5_data(n, None)

    def metric(Y1: sp.Matrix, Y2: sp.Matrix) -> sp.Expr:
        return F.killing(A * Y1 * A, Y2)

    plain = lie_chaplygin_system(s, X, metric)
    ref = veselova(n, form="lie-algebra", inertia=lambda Om: A * Om * A, params=[])
    for i, j, k in itertools.product(range(2), repeat=3):
        assert sp.cancel(sp.expand(plain.C[i, j, k] - ref.C[i, j, k])) == 0
    g = sp.Matrix(F.hemisphere_gamma(s))
    with pytest.raises(ValueError, match="not a lift"):
        lie_chaplygin_system(s, [2 * X[0], X[1]], metric, action=lambda Y: list(-Y * g)[:2])
    with pytest.raises(ValueError, match="not symmetric"):
        lie_chaplygin_system(s, X, lambda Y1, Y2: F.killing(Y1, Y2) + Y1[0, 1] * Y2[0, 2])
    with pytest.raises(ValueError, match="one element per shape"):
        lie_chaplygin_system(s, X[:1], metric)


def test_pairings_solution_matches_lusolve() -> None:
    x, y, p = sp.symbols("x y p", real=True)
    K = sp.Matrix([[1 + x**2, x * y, 0], [x * y, 2 + y**2, p], [0, p, 3 + p**2]])
    B = sp.MutableDenseNDimArray.zeros(3, 3, 3)
    for (i, j), m in itertools.product([(0, 1), (0, 2), (1, 2)], range(3)):
        B[i, j, m] = (i + 2 * j + m) * x - y**m + p
        B[j, i, m] = -B[i, j, m]
    C = pairings_solution(K, B, [x, y, p])
    for i, j, m in itertools.product(range(3), repeat=3):
        assert sp.cancel(sum(C[i, j, k] * K[k, m] for k in range(3)) - B[i, j, m]) == 0
    assert pairings_solution(K.applyfunc(lambda e: e + sp.sqrt(x)), B, [x, y, p]) is None
