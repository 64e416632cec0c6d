"""Seed 004 (García-Naranjo and Marrero 2020) claims that had no test, or only a weak one.

Each test names its claim ID (``/work/shared/FIDELITY.md``, seed 004 table) and checks it
against the paper's formula with an independent computation: the almost-Poisson bivector of
Prop. 2.1 and its Jacobiator (Thm 2.2), the reduced bracket (3.10) against ``-W^{-1}`` of
``Omega_nh`` (3.12), exterior derivatives formed here from the components, Lemma 3.13 from the
divergence of the package's reduced equations, Remark 4.1's first integral, the printed (4.13),
the velocity-chart density (V14), det K (V5), the inverse inertia map of Remark 4.2 and the
conformal metric ``Ktilde = c x* g_round``.  Unreduced particle trajectories (O14/P13) are
integrated from the digest's hand-derived Lagrange-d'Alembert equations with SciPy.
"""

from __future__ import annotations

import functools
import itertools
import random

import numpy as np
import pytest
import sympy as sp
from scipy.integrate import solve_ivp

import nhfast
from nhfast.symbolic._util import is_zero, is_zero_on_sphere
from nhfast.symbolic.chaplygin import hamiltonise, theta_form
from nhfast.symbolic.equations import chaplygin_equations
from nhfast.symbolic.systems import ReducedChaplyginSystem
from nhfast.systems import (
    chaplygin_sleigh,
    holonomic_particle,
    nonholonomic_particle,
    vertical_rolling_disk,
    veselova,
)


@functools.cache
def _particle(a=None, potential=None):  # noqa: ANN001, ANN202
    return nonholonomic_particle(a=a, potential=potential).reduce()


@functools.cache
def _veselova(n: int) -> ReducedChaplyginSystem:
    return veselova(n)


def _c(V: ReducedChaplyginSystem) -> sp.Expr:
    return V.extra["c"]


def _sphere_points(s: list[sp.Symbol], count: int, seed: int = 0) -> list[dict]:
    """Rational points of the open upper hemisphere: s = 2t/(1 + |t|^2), gamma_n rational too.

    ``gamma_n = (1 - |t|^2)/(1 + |t|^2) > 0`` for ``|t_i| <= 4/9``, ``r <= 4``, so every chart
    expression (rational in ``s`` and ``sqrt(1 - |s|^2)``) evaluates to an exact rational.
    """
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        t = [sp.Rational(rng.choice([-1, 1]) * rng.randint(1, 4), rng.randint(9, 15)) for _ in s]
        q = sum(ti**2 for ti in t)
        out.append({si: 2 * ti / (1 + q) for si, ti in zip(s, t, strict=True)})
    return out


def _at(expr: sp.Expr, point: dict) -> sp.Expr:
    """``expr`` at ``point``, exactly (a rational at the rational sphere points)."""
    v = sp.sympify(expr).xreplace(point)
    return v if v.is_Rational else sp.nsimplify(sp.simplify(v))


def _partial_at(expr: sp.Expr, var: sp.Symbol, point: dict) -> sp.Expr:
    """``d expr / d var`` at ``point`` (the other variables are substituted first)."""
    e = sp.sympify(expr).xreplace({k: v for k, v in point.items() if k != var})
    return _at(sp.diff(e, var), {var: point[var]})


_A3, _A4 = [sp.Integer(2), sp.Rational(7, 2), sp.Integer(5)], [2, sp.Rational(7, 2), 5, 3]


# ------------------------------------------------------------------ Section 2: brackets


def _almost_poisson_bivector(system) -> tuple[list[sp.Symbol], sp.Matrix]:  # noqa: ANN001
    """Prop. 2.1 on D* in coordinates (q^a, p_i): {q^a, p_i} = rho^a_i, {p_i, p_j} = -C^k_ij p_k."""
    q, rho = system.q, system.frame
    n, r = len(q), rho.shape[1]
    C = system.constraint_coefficients(simplify=False)
    p = list(sp.symbols(f"P1:{r + 1}", real=True))
    L = sp.zeros(n + r, n + r)
    for a in range(n):
        for i in range(r):
            L[a, n + i] = rho[a, i]
            L[n + i, a] = -rho[a, i]
    for i in range(r):
        for j in range(r):
            L[n + i, n + j] = -sum(C[i, j, k] * p[k] for k in range(r))
    return [*q, *p], L


def _jacobiator(x: list[sp.Symbol], L: sp.Matrix) -> list[sp.Expr]:
    """{{x^a, x^b}, x^c} + cyclic, for a < b < c (zero iff the bracket is Poisson)."""
    m = len(x)
    out = []
    for a, b, c in itertools.combinations(range(m), 3):
        e = sum(
            L[a, d] * sp.diff(L[b, c], x[d])
            + L[b, d] * sp.diff(L[c, a], x[d])
            + L[c, d] * sp.diff(L[a, b], x[d])
            for d in range(m)
        )
        out.append(e)
    return out


@pytest.mark.parametrize(
    ("factory", "integrable"),
    [
        (holonomic_particle, True),
        (nonholonomic_particle, False),
        (vertical_rolling_disk, False),
        (lambda: chaplygin_sleigh(as_chaplygin=False, blade_frame=True), False),
    ],
)
def test_004_4_jacobi_iff_D_integrable(factory, integrable: bool) -> None:  # noqa: ANN001
    # Thm 2.2: the almost-Poisson bracket on D* satisfies Jacobi iff D is integrable.  The disk
    # has T = 0 (its reduced bracket is Poisson) but D is not integrable: Jacobi fails on D*.
    S = factory()
    x, L = _almost_poisson_bivector(S)
    jac = _jacobiator(x, L)
    if integrable:
        assert all(is_zero(e) for e in jac)
    else:
        assert not all(is_zero(e) for e in jac)


def _reduced_bivector(red: ReducedChaplyginSystem, p: list[sp.Symbol]) -> sp.Matrix:
    """(3.10): Lambda = [[0, I], [-I, -Cp]], (Cp)_ij = C^k_ij p_k."""
    r = red.rank
    Cp = sp.Matrix(r, r, lambda i, j: sum(red.C[i, j, k] * p[k] for k in range(r)))
    return sp.Matrix(sp.BlockMatrix([[sp.zeros(r), sp.eye(r)], [-sp.eye(r), -Cp]]))


def _omega_nh(red: ReducedChaplyginSystem, p: list[sp.Symbol]) -> sp.Matrix:
    """(3.12) as Omega = 1/2 W_ab dx^a ^ dx^b on x = (s, p): W = [[Cp, I], [-I, 0]]."""
    r = red.rank
    Cp = sp.Matrix(r, r, lambda i, j: sum(red.C[i, j, k] * p[k] for k in range(r)))
    return sp.Matrix(sp.BlockMatrix([[Cp, sp.eye(r)], [-sp.eye(r), sp.zeros(r)]]))


def _particle_with_U() -> ReducedChaplyginSystem:
    x, y = sp.symbols("x y", real=True)
    return _particle(None, sp.Function("U")(x, y))


@pytest.mark.parametrize("which", ["particle", "veselova3"])
def test_004_5_reduced_bracket_3_10(which: str) -> None:
    # {p_i, p_j} = -C^k_ij p_k, {s^i, p_j} = delta: Lambda = -W^{-1} of Omega_nh (3.12), and
    # xdot = Lambda dH is the package's reduced system (3.17) (particle: arbitrary U(x, y))
    red = _particle_with_U() if which == "particle" else _veselova(3)
    eq = chaplygin_equations(red, simplify=False)
    r = red.rank
    p = eq.states[r:]
    Lam = _reduced_bivector(red, p)
    W = _omega_nh(red, p)
    assert all(is_zero(e) for e in Lam * W + sp.eye(2 * r))
    x = eq.states
    grad = sp.Matrix([sp.diff(eq.energy, v) for v in x])
    X = Lam * grad
    # {s^i, s^j} = 0 and Lambda is skew
    assert all(is_zero(e) for e in Lam + Lam.T)
    if which == "particle":
        assert all(is_zero(X[i] - eq.rhs[i]) for i in range(2 * r))
        return
    # Veselova: exactly at rational points (s on the sphere, p, a rational)
    rng = random.Random(5)
    for pt in _sphere_points(red.s, 3, seed=5):
        pt.update({pk: sp.Rational(rng.randint(-9, 9), 7) for pk in p})
        pt.update(dict(zip(red.params, _A3, strict=True)))
        assert all(_at(X[i] - eq.rhs[i], pt) == 0 for i in range(2 * r))


def _d_two_form(W: sp.Matrix, x: list[sp.Symbol]) -> dict[tuple[int, int, int], sp.Expr]:
    return {
        (a, b, c): sp.diff(W[b, c], x[a]) + sp.diff(W[c, a], x[b]) + sp.diff(W[a, b], x[c])
        for a, b, c in itertools.combinations(range(len(x)), 3)
    }


@pytest.mark.parametrize(
    ("which", "T_zero"),
    [("disk", True), ("holonomic", True), ("particle", False), ("sleigh", False)],
)
def test_004_6_omega_nh_closed_iff_T_zero(which: str, T_zero: bool) -> None:
    # (3.12)/(3.14)/(3.15): Omega_nh = Omega_can + Omega_T, Omega_T semi-basic; Thm 3.8:
    # non-degenerate, i_X Omega_nh = dH, and closed iff T = 0 -- the (s^i, s^j, p_k) component
    # of d Omega_nh is C^k_ij itself, the others vanish
    red = {
        "disk": lambda: vertical_rolling_disk().reduce(),
        "holonomic": lambda: holonomic_particle().reduce(),
        "particle": _particle,
        "sleigh": lambda: chaplygin_sleigh().reduce(),
    }[which]()
    r = red.rank
    p = list(sp.symbols(f"P1:{r + 1}", real=True))
    x = [*red.s, *p]
    W = _omega_nh(red, p)
    Wcan = sp.Matrix(sp.BlockMatrix([[sp.zeros(r), sp.eye(r)], [-sp.eye(r), sp.zeros(r)]]))
    WT = W - Wcan
    assert WT[:, r:] == sp.zeros(2 * r, r) and WT[r:, :] == sp.zeros(r, 2 * r)  # semi-basic
    assert W.det() == 1  # non-degenerate (i_X Omega_nh = dH: test_004_5, Lambda = -W^{-1})
    dW = _d_two_form(W, x)
    for (a, b, c), e in dW.items():
        if a < r and b < r and c >= r:
            assert is_zero(e - red.C[a, b, c - r]), (a, b, c)
        else:
            assert is_zero(e), (a, b, c)
    assert all(is_zero(e) for e in dW.values()) is T_zero


def test_004_10_lemma_3_13_divergence_particle() -> None:
    # div_{ds dp} X = -Theta_i sdot^i, symbolically (symbolic a, arbitrary U(x, y))
    red = _particle_with_U()
    eq = chaplygin_equations(red, simplify=False)
    r = red.rank
    div = sum(sp.diff(eq.rhs[i], eq.states[i]) for i in range(2 * r))
    th = theta_form(red.C, simplify=False)
    assert is_zero(div + sum(th[i] * eq.rhs[i] for i in range(r)))
    assert not is_zero(div)  # control: the flat density is not invariant for a != 0 either


@pytest.mark.parametrize("n", [3, pytest.param(4, marks=pytest.mark.slow)])
def test_004_10_lemma_3_13_divergence_veselova(n: int) -> None:
    # the same identity for the package's Veselova equations (symbolic a, the package's K^{-1}),
    # exactly at rational points; and div X = (n - 2)(A gamma, gammadot)/c (Thm 4.3, derived)
    V = _veselova(n)
    eq = chaplygin_equations(V, simplify=False)
    r = V.rank
    a_val = dict(zip(V.params, (_A3 if n == 3 else _A4), strict=True))
    rhs = [e.xreplace(a_val) for e in eq.rhs]
    th = [e.xreplace(a_val) for e in theta_form(V.C, simplify=False)]
    c = _c(V).xreplace(a_val)
    rng = random.Random(n)
    for pt in _sphere_points(V.s, 2 if n == 3 else 1, seed=n):
        pt.update({pk: sp.Rational(rng.randint(-9, 9), 7) for pk in eq.states[r:]})
        div = sum(_partial_at(rhs[i], eq.states[i], pt) for i in range(2 * r))
        sdot = [_at(rhs[i], pt) for i in range(r)]
        theta_sdot = sum(_at(th[i], pt) * sdot[i] for i in range(r))
        assert div == -theta_sdot and div != 0
        cdot = sum(_at(sp.diff(c, V.s[i]), pt) * sdot[i] for i in range(r))  # 2 (A gamma, gammadot)
        assert div == (n - 2) * cdot / (2 * _at(c, pt))


def test_004_14_17_conformal_closedness_and_darboux_particle() -> None:
    # Thm 3.21(i)/Lemma 3.24: d(e^phi Omega_nh) = 0 for phi = -1/2 ln(1 + y^2) (a = 0, P8), not
    # for phi = 0; Cor. 3.22 made explicit (O20/P10): with ptilde = e^phi p the pullback of
    # ds ^ dptilde is e^phi Omega_nh, and Htilde(s, ptilde) = H(s, e^{-phi} ptilde)
    red = _particle(0)
    x, y = red.s
    px, py = sp.symbols("p_x p_y", real=True)
    coords = [x, y, px, py]
    W = _omega_nh(red, [px, py])
    for phi, closed in ((-sp.log(1 + y**2) / 2, True), (sp.Integer(0), False)):
        dW = _d_two_form(sp.exp(phi) * W, coords)
        assert all(is_zero(e) for e in dW.values()) is closed
    phi = -sp.log(1 + y**2) / 2
    ptilde = [sp.exp(phi) * px, sp.exp(phi) * py]
    Jac = sp.Matrix(4, 4, lambda i, j: sp.diff([x, y, *ptilde][i], coords[j]))
    Wcan = sp.Matrix(sp.BlockMatrix([[sp.zeros(2), sp.eye(2)], [-sp.eye(2), sp.zeros(2)]]))
    assert all(is_zero(e) for e in Jac.T * Wcan * Jac - sp.exp(phi) * W)
    Hs = hamiltonise(red, phi=phi, simplify=False)
    eq = chaplygin_equations(red, simplify=False)
    back = dict(zip(Hs.p, ptilde, strict=True))
    H = eq.energy.xreplace(dict(zip(eq.states[2:], [px, py], strict=True)))
    assert is_zero(Hs.hamiltonian.xreplace(back) - H)
    assert is_zero(Hs.time_factor - sp.sqrt(1 + y**2))  # dt = e^{-phi} dtau


@pytest.mark.parametrize("n", [3, 4])
def test_004_14_conformal_closedness_veselova(n: int) -> None:
    # d(e^phi Omega_nh) = 0 with phi = -1/2 ln(A gamma, gamma) (Thm 4.3 + Thm 3.21(i)), exactly
    # at rational points of the sphere (e^{-phi} d(e^phi W) = d phi ^ W + d W); d W != 0 there
    V = _veselova(n)
    r = V.rank
    p = list(sp.symbols(f"P1:{r + 1}", real=True))
    coords = [*V.s, *p]
    W = _omega_nh(V, p)
    dphi = [sp.diff(-sp.log(_c(V)) / 2, v) for v in coords]
    rng = random.Random(14)
    for pt in _sphere_points(V.s, 1, seed=14):
        pt.update({pk: sp.Rational(rng.randint(-9, 9), 7) for pk in p})
        pt.update(dict(zip(V.params, _A3 if n == 3 else _A4, strict=True)))
        W0 = W.applyfunc(lambda e, pt=pt: _at(e, pt))
        g0 = [_at(e, pt) for e in dphi]
        dW_nonzero = False
        for a, b, c in itertools.combinations(range(2 * r), 3):
            dW = sum(
                _partial_at(W[i, j], coords[k], pt) for k, i, j in ((a, b, c), (b, c, a), (c, a, b))
            )
            conf = dW + g0[a] * W0[b, c] + g0[b] * W0[c, a] + g0[c] * W0[a, b]
            assert conf == 0, (a, b, c)
            dW_nonzero |= dW != 0
        assert dW_nonzero  # control: Omega_nh itself is not closed


# ------------------------------------------------------------------ Section 4.1: particle


def test_004_26_d_omega_nh_particle_component() -> None:
    # P9: a = 0, d Omega_nh has the (x, y, p_x) component -y / (1 + y^2) and no other
    red = _particle(0)
    x, y = red.s
    px, py = sp.symbols("p_x p_y", real=True)
    dW = _d_two_form(_omega_nh(red, [px, py]), [x, y, px, py])
    assert is_zero(dW[(0, 1, 2)] + y / (1 + y**2))
    assert all(is_zero(e) for k, e in dW.items() if k != (0, 1, 2))


def test_004_25_flat_density_fails_for_a_zero() -> None:
    # P6: a = 0, div X = y p_y / (1 + y^2) != 0 (rho = 1 is not invariant; the density is
    # needed), while div((1 + y^2)^(-1/2) X) = 0 (P5), with an arbitrary U(x, y)
    x, y = sp.symbols("x y", real=True)
    eq = chaplygin_equations(_particle(0, sp.Function("U")(x, y)), simplify=False)
    py = eq.states[3]
    div = sum(sp.diff(f, v) for v, f in zip(eq.states, eq.rhs, strict=True))
    assert is_zero(div - y * py / (1 + y**2))
    rho = (1 + y**2) ** sp.Rational(-1, 2)
    assert is_zero(sum(sp.diff(rho * f, v) for v, f in zip(eq.states, eq.rhs, strict=True)))


def test_004_27_non_basic_measure_symbolic_a() -> None:
    # O6/P11: for symbolic a and U_a = 1/4 ln(1 + (1 - a^2) y^2), eta_a = exp(a x + p_y^2) is
    # invariant: div(eta X) / eta = div X + X[a x + p_y^2] = 0; with U = 0 it is not
    x, y = sp.symbols("x y", real=True)
    a = sp.Symbol("a", real=True)
    for U, invariant in ((sp.log(1 + (1 - a**2) * y**2) / 4, True), (sp.Integer(0), False)):
        red = _particle(None, U)
        assert red.params == [a]  # the same symbol as in U_a
        eq = chaplygin_equations(red, simplify=False)
        log_eta = a * eq.states[0] + eq.states[3] ** 2
        div = sum(sp.diff(f, v) for v, f in zip(eq.states, eq.rhs, strict=True))
        X_log = sum(sp.diff(log_eta, v) * f for v, f in zip(eq.states, eq.rhs, strict=True))
        total = sp.cancel(sp.together(div + X_log))
        assert (total == 0) is invariant, (U, total)


def test_004_28_remark_4_1_first_integral() -> None:
    # F = exp(p_y^2) (1 + y^2)^(1/2) = eta_0 / mu is a first integral for U_0 = 1/4 ln(1 + y^2)
    # (a = 0), and only for that potential
    x, y = sp.symbols("x y", real=True)
    for U, conserved in (
        (sp.log(1 + y**2) / 4, True),
        (sp.log(1 + y**2) / 2, False),
        (y**2 / 2, False),
    ):
        eq = chaplygin_equations(_particle(0, U), simplify=False)
        px, py = eq.states[2:]
        F = sp.exp(py**2) * sp.sqrt(1 + y**2)
        assert is_zero(F - sp.exp(py**2) / (1 + y**2) ** sp.Rational(-1, 2))  # eta_0 / mu
        dF = sum(sp.diff(F, v) * f for v, f in zip(eq.states, eq.rhs, strict=True))
        assert is_zero(dF) is conserved, U


def _unreduced_particle(a: float):  # noqa: ANN202
    """Digest Section 3 (derived): G qddot = -grad U + lambda zeta, zeta . qddot = xdot ydot."""
    G = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, a], [0.0, a, 1.0]])

    def rhs(_t: float, z: np.ndarray) -> np.ndarray:
        x, y, _z, xd, yd, zd = z
        Ux = x + 0.3 * y * np.cos(x * y)
        Uy = 2 * y + 0.3 * x * np.cos(x * y)
        zeta = np.array([-y, 0.0, 1.0])
        M = np.zeros((4, 4))
        M[:3, :3] = G
        M[:3, 3] = -zeta
        M[3, :3] = zeta
        sol = np.linalg.solve(M, np.array([-Ux, -Uy, 0.0, xd * yd]))
        return np.array([xd, yd, zd, *sol[:3]])

    return rhs


def test_004_29_reduced_vs_unreduced_particle() -> None:
    # O14/P13: a in {0, 0.5, -0.8}, U = x^2/2 + y^2 + 0.3 sin(xy), t in [0, 20]: reduced (4.2)
    # (the package, compiled) against the unreduced Lagrange-d'Alembert equations on R^3 (SciPy)
    x, y = sp.symbols("x y", real=True)
    U = x**2 / 2 + y**2 + sp.Rational(3, 10) * sp.sin(x * y)
    eq = chaplygin_equations(_particle(None, U), simplify=False)
    vf = eq.as_vector_field()
    t = np.linspace(0.0, 20.0, 41)
    worst = 0.0
    for a in (0.0, 0.5, -0.8):
        q0, v0 = np.array([0.3, -0.2]), np.array([0.4, 0.25])
        zd0 = q0[1] * v0[0]  # constraint zdot = y xdot
        p0 = [(1 + q0[1] ** 2) * v0[0] + a * q0[1] * v0[1], a * q0[1] * v0[0] + v0[1]]
        red = nhfast.integrate(
            vf, [*q0, *p0], t, params=[a], method="dop853", rtol=1e-13, atol=1e-13
        )
        assert red.status[0] == 0
        ref = solve_ivp(
            _unreduced_particle(a),
            (0.0, 20.0),
            [*q0, 0.0, *v0, zd0],
            t_eval=t,
            method="DOP853",
            rtol=1e-13,
            atol=1e-13,
        )
        assert ref.success
        err = np.max(np.abs(red.y[0, :, :2] - ref.y[:2].T))
        worst = max(worst, err)
        # the reduced energy equals the unreduced one along the run
        Ur = ref.y[0] ** 2 / 2 + ref.y[1] ** 2 + 0.3 * np.sin(ref.y[0] * ref.y[1])
        V = ref.y[3:]
        G = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, a], [0.0, a, 1.0]])
        E_full = 0.5 * np.einsum("it,ij,jt->t", V, G, V) + Ur
        assert np.max(np.abs(E_full - E_full[0])) < 1e-10
    assert worst < 1e-10, worst


# ------------------------------------------------------------------ Section 4.2: Veselova


@pytest.mark.parametrize("n", [3, pytest.param(4, marks=pytest.mark.slow)])
def test_004_32_printed_4_13_B(n: int) -> None:
    # (4.13) as printed: B_ijl = a_n g_i g_j g_l (a_i - a_j)/g_n^2 + a_j g_i (a_i - a_n) delta_jl
    #                            - a_i g_j (a_j - a_n) delta_il
    # against <<[X_i, X_j], X_l>> from the left-trivialised brackets, and C K = B with (4.14)
    L = veselova(n, form="lie-algebra", compute_C=False)
    V = _veselova(n)
    s, a = V.s, V.params
    g = V.extra["gamma"]
    r, an, gn2 = n - 1, a[-1], 1 - sum(si**2 for si in s)
    B = L.extra["B"]
    # n = 3: symbolic in s and a; n = 4: exactly at a rational point of the sphere, rational a
    if n == 3:
        pts: list[dict] = [{}]
        zero = lambda e: is_zero_on_sphere(e, s)  # noqa: E731
    else:
        pts = _sphere_points(s, 1, seed=4)
        pts[0].update(dict(zip(a, _A4, strict=True)))
        zero = lambda e: _at(e, {}) == 0  # noqa: E731
    for pt in pts:
        for i, j, m in itertools.product(range(r), repeat=3):
            printed = (
                an * g[i] * g[j] * g[m] * (a[i] - a[j]) / gn2
                + (a[j] * g[i] * (a[i] - an) if j == m else 0)
                - (a[i] * g[j] * (a[j] - an) if i == m else 0)
            )
            assert zero((B[i, j, m] - printed).xreplace(pt)), (i, j, m)
            CK = sum(V.C[i, j, k] * V.K[k, m] for k in range(r))
            assert zero((CK - printed).xreplace(pt)), (i, j, m)
        # control: the printed form with the sign of the last term flipped fails
        i, j = 0, 1
        wrong = an * g[i] * g[j] * g[i] * (a[i] - a[j]) / gn2 + a[i] * g[j] * (a[j] - an)
        assert not zero((B[i, j, i] - wrong).xreplace(pt))


@pytest.mark.parametrize("n", [3, 4])
def test_004_47_det_K(n: int) -> None:
    # V5: det K = c^(n-2) det A / gamma_n^2, symbolically in s and a
    # (n = 3 fully symbolic; n = 4 symbolic in a, exactly at rational points of the sphere)
    V = _veselova(n)
    gn2 = 1 - sum(si**2 for si in V.s)
    detA = sp.Mul(*V.params)
    c = _c(V)
    if n == 3:
        d = V.K.det(method="berkowitz")
        assert is_zero_on_sphere(d * gn2 - c ** (n - 2) * detA, V.s)
        assert not is_zero_on_sphere(d * gn2 - c ** (n - 1) * detA, V.s)  # control
        return
    for pt in _sphere_points(V.s, 2, seed=47):
        d = V.K.xreplace(pt).det(method="berkowitz")
        assert sp.expand(d * gn2.xreplace(pt) - (c ** (n - 2) * detA).xreplace(pt)) == 0
        assert sp.expand(d * gn2.xreplace(pt) - (c ** (n - 1) * detA).xreplace(pt)) != 0


@pytest.mark.parametrize("n", [3, 4])
def test_004_46_velocity_chart_density(n: int) -> None:
    # V14 / 4.3(b): w.r.t. ds dsdot the invariant density is c^((n-2)/2) / gamma_n^2; the
    # momentum density c^((2-n)/2) (w.r.t. ds dp) is not invariant in these variables.
    # The (s, v = sdot) field is (3.17) with the package's K and C, pushed through p = K v:
    # s' = v, v' = K^{-1} g, g = pdot - Kdot v, pdot_i = 1/2 v.(d_i K) v - C^k_ij (K v)_k v^j.
    # div X = tr(K^{-1} dg/dv) (s' = v does not depend on s); div(rho X)/rho =
    # div X + v.d ln rho must vanish as a polynomial in v, exactly at rational points s.
    V = _veselova(n)
    r, s = V.rank, V.s
    sub = dict(zip(V.params, _A3 if n == 3 else _A4, strict=True))
    K, C, c = V.K.xreplace(sub), V.C.applyfunc(lambda e: e.xreplace(sub)), _c(V).xreplace(sub)
    gn2 = 1 - sum(si**2 for si in s)
    v = sp.Matrix(sp.symbols(f"v1:{r + 1}", real=True))
    dK = [K.diff(si) for si in s]
    densities = {
        "velocity": c ** sp.Rational(n - 2, 2) / gn2,
        "momentum": c ** sp.Rational(2 - n, 2),
        "flat": sp.Integer(1),
    }
    for pt in _sphere_points(s, 2 if n == 3 else 1, seed=46):
        K0, dK0 = K.xreplace(pt), [m.xreplace(pt) for m in dK]
        C0 = C.applyfunc(lambda e, pt=pt: _at(e, pt))
        Kv = K0 * v
        pdot = [
            (v.T * dK0[i] * v)[0, 0] / 2
            - sum(C0[i, j, k] * Kv[k] * v[j] for j in range(r) for k in range(r))
            for i in range(r)
        ]
        Kdot_v = sum((dK0[m] * v * v[m] for m in range(r)), sp.zeros(r, 1))
        g = sp.Matrix(pdot) - Kdot_v
        div = (K0.inv() * g.jacobian(v)).trace()
        res = {
            k: sp.expand(div + sum(_partial_at(sp.log(rho), s[i], pt) * v[i] for i in range(r)))
            for k, rho in densities.items()
        }
        assert res["velocity"] == 0, res
        assert res["momentum"] != 0 and res["flat"] != 0, res


def test_004_49_every_diagonal_inertia_is_of_type_4_5() -> None:
    # Remark 4.2 / 4.3(c): I = det(A) A^{-1}; conversely a_i = sqrt(I_j I_k / I_i) for any positive
    # diagonal I, and (A gamma, gamma) = det A (I^{-1} gamma, gamma)
    I = sp.symbols("I1:4", positive=True)  # noqa: E741
    a = [sp.sqrt(I[(i + 1) % 3] * I[(i + 2) % 3] / I[i]) for i in range(3)]
    S = veselova(3, form="so3")
    sub = dict(zip(S.params, a, strict=True))
    inertia = S.inertia.subs(sub)
    assert all(is_zero(inertia[i, j] - (I[i] if i == j else 0)) for i in range(3) for j in range(3))
    A = sp.diag(*a)
    assert all(is_zero(e) for e in A.det() * A.inv() - sp.diag(*I))
    g = sp.Matrix(sp.symbols("g1:4", real=True))
    lhs = (g.T * A * g)[0, 0]
    rhs = A.det() * (g.T * sp.diag(*I).inv() * g)[0, 0]
    assert is_zero(lhs - rhs)
    # forward then inverse map is the identity on a
    b = sp.symbols("b1:4", positive=True)
    Ib = [b[1] * b[2], b[0] * b[2], b[0] * b[1]]
    assert all(is_zero(sp.sqrt(Ib[(i + 1) % 3] * Ib[(i + 2) % 3] / Ib[i]) - b[i]) for i in range(3))


@pytest.mark.parametrize("n", [3, 4])
def test_004_50_conformal_metric_is_c_times_round_pullback(n: int) -> None:
    # Ktilde = exp(2 phi) K = K / c equals c x* g_round with x = A^(1/2) gamma / |A^(1/2) gamma|
    V = _veselova(n)
    s, a, g = V.s, V.params, V.extra["gamma"]
    c = _c(V)
    xs = [sp.sqrt(ak) * gk / sp.sqrt(c) for ak, gk in zip(a, g, strict=True)]
    J = sp.Matrix(n, n - 1, lambda i, j: sp.diff(xs[i], s[j]))
    pull = J.T * J
    # exactly at rational points of the sphere and rational (square) inertia
    sub = dict(zip(a, [1, 4, 9, 16][:n], strict=True))
    for pt in _sphere_points(s, 2, seed=50):
        pt.update(sub)
        for k, m in itertools.product(range(n - 1), repeat=2):
            assert _at(c * pull[k, m] - V.K[k, m] / c, pt) == 0, (k, m)
        assert _at(pull[0, 0] - V.K[0, 0] / c, pt) != 0  # control: the factor c matters
