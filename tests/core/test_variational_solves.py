"""``VectorField.variational()`` for fields with ``solves=`` (implicit differentiation).

The variational solution ``M(t)`` is checked against central differences of the flow (DOP853
at rtol 1e-12), against the variational equations of an explicit (solve-free) formulation of
the same flow, against Liouville's formula ``det M(t) = exp(int_0^t div X)`` and, for the
Veselova chart at ``n = 4`` (``r = 3``, velocities from a solve), against the invariant
density ``c^((2-n)/2)`` of seed 004 Theorem 4.3: ``det M(t) = rho(x(0)) / rho(x(t))``.
"""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp

import nhfast as nh
from nhfast.analysis.measure import variational_field
from nhfast.analysis.sampling import as_vector_field
from nhfast.systems import suslov, veselova

TIGHT = {"method": "dop853", "rtol": 1e-12, "atol": 1e-12, "observables": False}


def _flow_fd(vf: nh.VectorField, x0: np.ndarray, t, params, eps: float = 1e-5) -> np.ndarray:
    """Central differences of the flow of ``vf``: shape (n_traj, n_t, n, n)."""
    x0 = np.atleast_2d(x0)
    k, n = x0.shape
    par = None if params is None else np.tile(np.atleast_2d(params), (2 * n, 1))
    out = np.empty((k, len(t), n, n))
    for lane in range(k):
        shifts = np.vstack([np.eye(n) * eps, -np.eye(n) * eps])
        y = nh.integrate(vf, x0[lane] + shifts, t, params=par, **TIGHT).y
        out[lane] = np.transpose((y[:n] - y[n:]) / (2 * eps), (1, 2, 0))
    return out


def _variational_run(vf: nh.VectorField, x0, t, params):
    var = vf.variational()
    y = nh.integrate(var, vf.variational_initial(np.atleast_2d(x0)), t, params=params, **TIGHT).y
    return vf.variational_split(y)


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.max(np.abs(a - b)) / max(1.0, float(np.max(np.abs(b)))))


# ---------------------------------------------------------------- small fields with solves ----
th1, th2, p1, p2, v1, v2, g = sp.symbols("theta1 theta2 p1 p2 v1 v2 g")
_K = sp.Matrix([[2, sp.cos(th1 - th2)], [sp.cos(th1 - th2), 1]])  # double pendulum, m = l = 1
_V = -g * (2 * sp.cos(th1) + sp.cos(th2))


def _pendulum_implicit() -> nh.VectorField:
    """Double pendulum in (theta, p), velocities K^-1 p from a solve, partitioned (split=2)."""
    v = sp.Matrix([v1, v2])
    dHdq = [-(v.T * _K.diff(q) * v)[0] / 2 + _V.diff(q) for q in (th1, th2)]
    return nh.VectorField(
        states=[th1, th2, p1, p2],
        rhs=[v1, v2, -dHdq[0], -dHdq[1]],
        params=[g],
        split=2,
        solves=[nh.LinearSolve(unknowns=[v1, v2], matrix=_K, rhs=[p1, p2], spd=True)],
        name="double pendulum (solve)",
    )


def _pendulum_explicit() -> nh.HamiltonianSystem:
    P = sp.Matrix([p1, p2])
    H = (P.T * _K.inv() * P)[0] / 2 + _V
    return nh.HamiltonianSystem([th1, th2], [p1, p2], H, params=[g], name="double pendulum")


def _chained() -> nh.VectorField:
    """Time-dependent field with two solves, the second using the first's unknown (LU)."""
    x, y, z, t, u, w1, w2, k = sp.symbols("x y z t u w1 w2 k")
    s1 = nh.LinearSolve(unknowns=[u], matrix=[[2 + sp.sin(t) + x**2]], rhs=[y * z], spd=True)
    s2 = nh.LinearSolve(
        unknowns=[w1, w2],
        matrix=[[3 + z**2, u], [-u, 2 + y**2]],
        rhs=[x * u + k, sp.sin(x) - u * z],
        spd=False,
    )
    return nh.VectorField(
        states=[x, y, z],
        rhs=[w1 + u * y, -x + w2 * u, sp.cos(z) * w1 - k * z],
        params=[k],
        time=t,
        solves=[s1, s2],
        name="chained solves",
    )


# ---------------------------------------------------------------------------------- tests ----
@pytest.mark.parametrize("which", ["suslov", "veselova_so3"])
def test_lie_group_fields_match_finite_differences_and_liouville(which):
    """Every LieGroupSystem field has a solve (accelerations and multipliers, LU)."""
    if which == "suslov":
        vf = suslov().as_vector_field()
        par = np.array([1.0, 2.0, 3.0, 0.3, -0.2])
        x0 = np.array([[0.5, -0.4, 0.3], [-0.2, 0.7, -0.1]])
    else:
        vf = veselova(3, form="so3").as_vector_field()
        par = np.array([1.0, 2.0, 3.5])
        gam = np.array([0.3, -0.5, 0.8]) / np.linalg.norm([0.3, -0.5, 0.8])
        om = np.cross(gam, [1.0, 0.4, -0.3])  # (omega, gamma) = 0
        x0 = np.concatenate([om, gam])[None, :]
    assert vf.solves
    t = np.array([0.0, 0.7, 1.5])
    x, M = _variational_run(vf, x0, t, par)
    plain = nh.integrate(vf, x0, t, params=par, **TIGHT).y
    assert np.max(np.abs(x - plain)) < 1e-12  # the states themselves are unchanged
    assert np.array_equal(M[:, 0], np.broadcast_to(np.eye(vf.n_state), M[:, 0].shape))
    fd = _flow_fd(vf, x0, t, par)
    assert _rel(M, fd) < 1e-6
    assert np.max(np.abs(M[:, -1] - np.eye(vf.n_state))) > 0.05  # not a trivial flow
    # Liouville's formula against the divergence integral of with_divergence()
    lf = vf.with_divergence()
    z0 = np.hstack([x0, np.zeros((len(x0), 1))])
    ell = nh.integrate(lf, z0, t, params=par, **TIGHT).y[..., -1]
    logdet = np.log(np.abs(np.linalg.det(M)))
    assert np.max(np.abs(logdet - ell)) < 1e-9
    assert np.max(np.abs(ell)) > 1e-3  # the divergence is not zero here


def test_veselova_chart_n4_det_is_density_ratio():
    """Chart field with r = 3 (velocities from an SPD solve): det M(t) = c(x(t)) / c(x(0)),
    since rho = c^((2-n)/2) = 1/c is invariant (seed 004 Thm 4.3) and rho det M is constant;
    control: the Liouville density (constant) is not (det M != 1)."""
    vf = as_vector_field(veselova(4))
    assert vf.solves and vf.n_state == 6
    a = np.array([1.0, 1.7, 2.6, 0.8])
    x0 = np.array([[0.2, -0.3, 0.25, 0.4, -0.6, 0.3], [-0.3, 0.1, -0.2, -0.5, 0.2, 0.7]])
    t = np.array([0.0, 0.5, 1.0])
    x, M = _variational_run(vf, x0, t, a)
    s = x[..., :3]
    c = a[-1] + np.sum((a[:3] - a[-1]) * s**2, axis=-1)
    det = np.linalg.det(M)
    assert np.max(np.abs(det - c / c[:, :1])) < 1e-9
    assert np.max(np.abs(det - 1.0)) > 1e-2  # the coordinate volume itself is not preserved
    fd = _flow_fd(vf, x0[:1], t, a)
    assert _rel(M[:1], fd) < 1e-6


def test_partitioned_field_with_solve_matches_explicit_hamiltonian():
    """split= with solves: the layout (a, M rows of a, b, M rows of b) holds, and M agrees
    with the variational equations of the explicit Hamiltonian (no solves) and is symplectic."""
    imp, exp = _pendulum_implicit(), _pendulum_explicit()
    var = imp.variational()
    assert var.split == 2 * 5 and var.solves
    assert list(var.states[:2]) == [th1, th2] and list(var.states[10:12]) == [p1, p2]
    x0 = np.array([[0.4, -0.7, 0.3, 0.2], [1.1, 0.2, -0.5, 0.6]])
    t = np.array([0.0, 1.0, 2.5])
    xi, Mi = _variational_run(imp, x0, t, [9.81])
    xe, Me = _variational_run(exp, x0, t, [9.81])
    assert np.max(np.abs(xi - xe)) < 1e-9
    assert _rel(Mi, Me) < 1e-8
    J = np.block([[np.zeros((2, 2)), np.eye(2)], [-np.eye(2), np.zeros((2, 2))]])
    sym = np.einsum("ltji,jk,ltkm->ltim", Mi, J, Mi) - J
    assert np.max(np.abs(sym)) < 1e-8
    assert _rel(Mi, _flow_fd(imp, x0, t, [9.81])) < 1e-6


def test_chained_time_dependent_solves_match_finite_differences():
    vf = _chained()
    x0 = np.array([[0.3, -0.5, 0.8], [-0.6, 0.4, 0.1]])
    t = np.array([0.2, 1.0, 2.0])  # t0 != 0: the solves see the time
    x, M = _variational_run(vf, x0, t, [0.7])
    fd = _flow_fd(vf, x0, t, [0.7])
    assert _rel(M, fd) < 1e-6
    assert np.max(np.abs(M[:, -1] - np.eye(3))) > 0.05


@pytest.mark.parametrize("which", ["suslov", "chained"])
def test_numpy_backend_matches_c_backend(which, monkeypatch):
    if which == "suslov":
        vf, par = suslov().as_vector_field(), np.array([1.0, 2.0, 3.0, 0.3, -0.2])
        x0 = np.array([[0.5, -0.4, 0.3]])
    else:
        vf, par, x0 = _chained(), np.array([0.7]), np.array([[0.3, -0.5, 0.8]])
    t = np.array([0.0, 1.0])
    _, Mc = _variational_run(vf, x0, t, par)
    monkeypatch.setenv("NHFAST_BACKEND", "numpy")
    var = vf.variational()  # a fresh field: nothing compiled for it yet
    y = nh.integrate(var, vf.variational_initial(x0), t, params=par, **TIGHT).y
    assert var.compile(()).backend == "numpy"
    _, Mn = vf.variational_split(y)
    assert np.max(np.abs(Mn - Mc)) < 1e-10
    assert _rel(Mn, _flow_fd(vf, x0, t, par)) < 1e-6


def _old_variational(vf: nh.VectorField) -> nh.VectorField:
    """The construction of variational() before solves were supported (no solves)."""
    n = vf.n_state
    J = sp.Matrix(vf.rhs).jacobian(sp.Matrix(vf.states))
    M = sp.Matrix(n, n, lambda i, j: sp.Symbol(f"M_{i}_{j}"))
    dM = J * M
    rows = list(range(n))
    groups = [rows[: vf.split], rows[vf.split :]] if vf.split is not None else [rows]
    states: list = []
    rhs: list = []
    for grp in groups:
        states += [vf.states[i] for i in grp]
        rhs += [vf.rhs[i] for i in grp]
        for i in grp:
            states += list(M.row(i))
            rhs += list(dM.row(i))
    split = None if vf.split is None else vf.split * (n + 1)
    return nh.VectorField(
        states=states, rhs=rhs, params=vf.params, time=vf.time, split=split, name=vf.name
    )


@pytest.mark.parametrize("fixture", ["sleigh", "kepler", "nonautonomous"])
def test_fields_without_solves_unchanged(fixture, request):
    vf = request.getfixturevalue(fixture)
    new, old = vf.variational(), _old_variational(vf)
    assert new.solves == () and new.split == old.split
    assert list(new.states) == list(old.states)
    assert all(sp.sympify(a) == sp.sympify(b) for a, b in zip(new.rhs, old.rhs, strict=True))
    par = {"sleigh": [0.5, 1.0, 2.0], "kepler": None, "nonautonomous": None}[fixture]
    x0 = {
        "sleigh": [0.0, 0.0, 0.1, 0.4, -0.3],
        "kepler": [1.0, 0.0, 0.1, 0.9],
        "nonautonomous": [0.7],
    }[fixture]
    y0 = vf.variational_initial(np.array([x0]))
    a = nh.integrate(new, y0, [0.0, 0.5, 1.0], params=par, **TIGHT).y
    b = nh.integrate(old, y0, [0.0, 0.5, 1.0], params=par, **TIGHT).y
    assert np.array_equal(a, b)


def test_measure_module_uses_the_public_method():
    vf = suslov().as_vector_field()
    field, initial, split = variational_field(vf)
    assert field.solves and initial == vf.variational_initial and split == vf.variational_split
    assert variational_field(vf)[0] is field  # cached on vf


def test_with_divergence_field_with_solves_is_rejected_specifically():
    vf = suslov().as_vector_field().with_divergence()
    with pytest.raises(ValueError, match="second derivatives of its solves' unknowns"):
        vf.variational()
    # a with_divergence field without solves still has variational equations
    x, y = sp.symbols("x y")
    plain = nh.VectorField([x, y], [y, -sp.sin(x) - y]).with_divergence()
    assert plain.variational().n_state == 3 * 4
