"""Validation and construction of NonholonomicSystem / ChaplyginSystem (nhfast.systems)."""

from __future__ import annotations

import pytest
import sympy as sp

from nhfast.symbolic._util import is_zero, matrix_is_zero
from nhfast.symbolic.systems import (
    ChaplyginSystem,
    NonholonomicSystem,
    ReducedChaplyginSystem,
)
from nhfast.systems import (
    chaplygin_sleigh,
    nonholonomic_particle,
    vertical_rolling_disk,
)

x, y, z = sp.symbols("x y z", real=True)
a = sp.Symbol("a", real=True)
G3 = sp.Matrix([[1, 0, 0], [0, 1, a], [0, a, 1]])
W = sp.Matrix([[-y, 0, 1]])


def test_keeps_user_order() -> None:
    q = [z, x, y]
    Gp = sp.Matrix([[1, 0, a], [0, 1, 0], [a, 0, 1]])  # same metric, reordered coordinates
    sysm = NonholonomicSystem(q, Gp, 0, constraints=sp.Matrix([[1, -y, 0]]), params=[a])
    assert sysm.q == [z, x, y]
    assert sysm.params == [a]
    # D = ker W and the frame really spans it
    assert matrix_is_zero(sp.Matrix([[1, -y, 0]]) * sysm.frame)
    assert sysm.rank == 2


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"q": [x, x, z]}, ValueError, "q contains the symbol x twice"),
        ({"q": ["x", y, z]}, TypeError, "q must contain only SymPy Symbols"),
        ({"q": x}, TypeError, "q must be a list"),
        ({"metric": sp.eye(2)}, ValueError, "metric must be a square 3 x 3"),
        ({"metric": sp.Matrix([[1, 0, 0], [0, 1, a], [0, 0, 1]])}, ValueError, "not symmetric"),
        ({"metric": 3}, TypeError, "metric"),
        ({"potential": sp.Symbol("k") * x}, ValueError, "potential contains undeclared symbol.* k"),
        ({"potential": "x**2"}, TypeError, "potential"),
        ({"params": []}, ValueError, "metric contains undeclared symbol.* a"),
        ({"params": [a, x]}, ValueError, "params and q share"),
        ({"constraints": sp.Matrix([[-y, 0]])}, ValueError, "constraints must have len"),
        ({"constraints": sp.Matrix([[-y, 0, 1], [-2 * y, 0, 2]])}, ValueError, "full rank"),
        (
            {"constraints": sp.Matrix([[-sp.Symbol("c"), 0, 1]])},
            ValueError,
            "constraints contains undeclared.* c",
        ),
        (
            {"frame": sp.Matrix([[1, 2], [0, 0], [y, 2 * y]])},
            ValueError,
            "frame does not have full rank",
        ),
        ({"frame": sp.Matrix([[1], [0], [0]]), "constraints": W}, ValueError, "not both"),
    ],
)
def test_bad_input(kwargs: dict, exc: type, match: str) -> None:
    args = {"q": [x, y, z], "metric": G3, "potential": 0, "constraints": W, "params": [a]}
    if "frame" in kwargs and "constraints" not in kwargs:
        args.pop("constraints")
    args.update(kwargs)
    with pytest.raises(exc, match=match):
        NonholonomicSystem(**args)


def test_frame_input_equivalent_to_forms() -> None:
    s1 = NonholonomicSystem([x, y, z], G3, constraints=W, params=[a])
    s2 = NonholonomicSystem([x, y, z], G3, frame=sp.Matrix([[1, 0], [0, 1], [y, 0]]), params=[a])
    assert matrix_is_zero(s1.reduced_metric() - s2.reduced_metric())
    c1, c2 = s1.constraint_coefficients(), s2.constraint_coefficients()
    assert all(
        is_zero(c1[i, j, k] - c2[i, j, k]) for i in range(2) for j in range(2) for k in range(2)
    )


def test_unconstrained_default() -> None:
    s = NonholonomicSystem([x, y], sp.eye(2))
    assert s.rank == 2 and s.frame == sp.eye(2)


def test_chaplygin_particle_horizontal_lifts() -> None:
    S = nonholonomic_particle()
    assert S.shape == [S.q[0], S.q[1]] and S.group == [S.q[2]]
    yy = S.q[1]
    assert S.horizontal_lifts() == sp.Matrix([[1, 0], [0, 1], [yy, 0]])


def test_chaplygin_errors() -> None:
    # wrong number of constraints: dim G = 2 but one constraint
    with pytest.raises(ValueError, match="splitting .* fails: 1 constraint"):
        ChaplyginSystem([x, y, z], G3, 0, constraints=W, shape=[x], params=[a])
    # group block singular: D contains the group direction d_x
    with pytest.raises(ValueError, match="restricted to the group velocities"):
        ChaplyginSystem(
            [x, y, z], G3, 0, constraints=sp.Matrix([[0, -y, 1]]), shape=[y, z], params=[a]
        )
    with pytest.raises(ValueError, match="potential depends on group"):
        ChaplyginSystem([x, y, z], G3, z**2, constraints=W, shape=[x, y], params=[a])
    with pytest.raises(ValueError, match="shape contains"):
        ChaplyginSystem([x, y, z], G3, 0, constraints=W, shape=[x, sp.Symbol("w")], params=[a])
    with pytest.raises(ValueError, match="group must be"):
        ChaplyginSystem([x, y, z], G3, 0, constraints=W, shape=[x, y], group=[x], params=[a])


def test_sleigh_is_not_R2_chaplygin() -> None:
    # rank D + dim G = 2 + 2 > 3: the splitting T_qQ = D + g.q must be rejected
    S = chaplygin_sleigh(as_chaplygin=False)
    xs, ys, ths = S.q
    with pytest.raises(ValueError, match="splitting"):
        ChaplyginSystem(
            S.q,
            S.metric,
            0,
            constraints=S.constraint_forms,
            shape=[ths],
            group=[xs, ys],
            params=S.params,
        )


def test_sleigh_R_chaplygin_splitting_determinant() -> None:
    S = chaplygin_sleigh()
    th = S.q[2]
    # adapted coordinates fail exactly where sin(theta) = 0
    assert is_zero(S.splitting_determinant + sp.sin(th))


def test_disk_reduce_group_free() -> None:
    red = vertical_rolling_disk().reduce()
    assert isinstance(red, ReducedChaplyginSystem)
    m, R, I, J = red.params  # noqa: E741
    assert matrix_is_zero(red.K - sp.diag(I, J + m * R**2))


def test_reduced_system_validation() -> None:
    s1, s2 = sp.symbols("s1 s2")
    with pytest.raises(ValueError, match="C must have shape"):
        ReducedChaplyginSystem(s=[s1, s2], K=sp.eye(2), C=sp.MutableDenseNDimArray.zeros(2, 2, 3))
    with pytest.raises(ValueError, match="K contains undeclared"):
        ReducedChaplyginSystem(
            s=[s1, s2], K=sp.diag(1, sp.Symbol("m")), C=sp.MutableDenseNDimArray.zeros(2, 2, 2)
        )


def test_metric_must_be_positive_definite() -> None:
    x, y, m = sp.symbols("x y m")
    W = sp.Matrix([[1, -x]])
    with pytest.raises(ValueError, match="metric is singular at the generic point"):
        NonholonomicSystem([x, y], sp.Matrix([[m, m], [m, m]]), 0, constraints=W, params=[m])
    with pytest.raises(ValueError, match="metric is not positive definite .* eigenvalue"):
        NonholonomicSystem([x, y], sp.diag(m, -m), 0, constraints=W, params=[m])
    NonholonomicSystem([x, y], sp.diag(m, 2 * m), 0, constraints=W, params=[m])  # fine


def test_package_exports_are_the_functions() -> None:
    """A submodule named like an exported function would shadow it on the package."""
    import nhfast.systems as systems

    for name in systems.__all__:
        assert not isinstance(getattr(systems, name), type(systems)), name
    assert callable(systems.veselova) and systems.veselova(3).rank == 2


def test_metric_with_undefined_functions_is_accepted():
    """A metric such as diag(1, F(q1), 1) (seed 001 Sec. 7.1 class) is taken as given: its
    positivity cannot be checked at points, so no raw TypeError from a float conversion."""
    q1, q2, q3 = sp.symbols("q1 q2 q3")
    F = sp.Function("F")(q1)
    S = NonholonomicSystem([q1, q2, q3], sp.diag(1, F, 1), constraints=sp.Matrix([[0, -q1, 1]]))
    assert S.rank == 2
    assert S.metric[1, 1] == F
