"""Constraint algorithm and vakonomic bracket (nhfast.symbolic.vakonomic.constraint_algorithm).

Oracles: digest seed002_003.md B.2.4-B.2.6, Example VII.4 (V1, V10-V14), Example VIII.6
(P9-P13), test system T3 (N != 0) with the exact values of the true bracket and of the literal
reading of the printed formula (18); equality with the Dirac bracket (Prop. VII.1); agreement of
X_{h_2} with the Lagrangian rates (14)/(15) of the coordinate form.
"""

from __future__ import annotations

import functools

import pytest
import sympy as sp

from nhfast.errors import ConstraintAlgorithmError
from nhfast.symbolic._util import is_zero
from nhfast.symbolic.systems import NonholonomicSystem
from nhfast.symbolic.vakonomic import (
    dirac_bergmann,
    poisson_bracket,
    vakonomic_equations,
    vakonomic_hamiltonian,
)
from nhfast.systems import (
    contact_particle,
    holonomic_particle,
    vertical_rolling_disk,
)


@functools.cache
def disk():  # noqa: ANN201
    S = vertical_rolling_disk(convention="martinez")
    return S, vakonomic_hamiltonian(S)


@functools.cache
def particle(basis: str):  # noqa: ANN201
    S = contact_particle(basis)
    return S, vakonomic_hamiltonian(S)


@functools.cache
def t3():  # noqa: ANN201
    x, y, z = sp.symbols("x y z", real=True)
    S = NonholonomicSystem(
        [x, y, z], sp.diag(1, 1 + x**2 / 4, 1), 0, constraints=sp.Matrix([[1, 0, y], [0, 1, x]])
    )
    return S, vakonomic_hamiltonian(S)


def _at_points(expr, q, others, n: int = 3) -> list:  # noqa: ANN001
    """``expr`` at ``n`` generic exact rational points: every angle in ``q`` on the rational
    unit circle (cos = (1-t^2)/(1+t^2), sin = 2t/(1+t^2)), ``others`` rational.  A rational
    function of (cos, sin, others) that vanishes identically gives 0 at each; a nonzero value
    proves it is not identically 0."""
    e = sp.expand_trig(sp.sympify(expr))
    out = []
    for k in range(n):
        sub = {}
        for j, a in enumerate(q):
            t = sp.Rational(k + j + 2, 2 * k + 2 * j + 7)
            sub[sp.cos(a)] = (1 - t**2) / (1 + t**2)
            sub[sp.sin(a)] = 2 * t / (1 + t**2)
        num = {v: sp.Rational(3 * k + 5 * j + 4, 11 + 2 * j) for j, v in enumerate(others)}
        out.append(sp.cancel(e.xreplace(sub).xreplace(num)))
    return out


def _zero(expr, S, vh) -> bool:  # noqa: ANN001
    """Exact zero test of a function on the disk's M_2 at generic rational points."""
    th = S.q[2]
    others = [*S.q[:2], S.q[3], *vh.p_hat, *S.params]
    return all(v == 0 for v in _at_points(expr, [th], others))


# ------------------------------------------------------------------ the algorithm ----
@pytest.mark.parametrize("which", ["disk", "particle_x", "t3"])
def test_algorithm_stops_at_step_two_with_determined_multipliers(which: str) -> None:
    S, vh = {"disk": disk, "particle_x": lambda: particle("x"), "t3": t3}[which]()
    res = vh.algorithm
    assert res.stop_step == 2
    assert res.final_dimension == 2 * S.dim  # M_2 has dim 2n (Section V)
    assert res.multipliers_determined and res.second_class
    assert [len(s) for s in res.stages] == [S.dim - S.rank] * 2
    # final manifold: p_lambda = 0 and lambda = D^-1 W g^-1 phat
    m = len(vh.lam)
    target = vh.D.LUsolve(vh.W * vh.metric.inv() * sp.Matrix(vh.p_hat))
    for i in range(m):
        assert res.solution[vh.p_lam[i]] == 0
        assert is_zero(res.solution[vh.lam[i]] - target[i])
    assert "stops at step 2" in res.summary()


def test_disk_V1_V10_V11_V12() -> None:
    S, vh = disk()
    x, y, th, ph = S.q
    I1, I2, R = S.params
    px, py, pth, pph = vh.p_hat
    a = -I2 / (I2 + R**2)
    assert all(is_zero(e) for e in vh.D - sp.diag(1, 1 + R**2 / I2))  # V1
    assert all(is_zero(e) for e in vh.N())  # N = 0 for the disk
    lam, mu = vh.lam_on_M2  # V10
    assert is_zero(lam - (px * sp.sin(th) - py * sp.cos(th)))
    assert is_zero(mu + a * (px * sp.cos(th) + py * sp.sin(th) - R / I2 * pph))
    h2 = (  # V11
        (1 + a) * sp.cos(th) ** 2 * px**2
        + (1 + a) * sp.sin(th) ** 2 * py**2
        + pth**2 / I1
        - a / I2 * pph**2
        + (1 + a) * sp.sin(2 * th) * px * py
        - 2 * R * a / I2 * sp.cos(th) * px * pph
        - 2 * R * a / I2 * sp.sin(th) * py * pph
    ) / 2
    assert is_zero(vh.h2 - h2)
    p = vh.pi_tilde()  # V12
    expected = [
        (1 + a) * sp.cos(th) ** 2 * px
        + (1 + a) * sp.sin(th) * sp.cos(th) * py
        - R * a / I2 * sp.cos(th) * pph,
        (1 + a) * sp.sin(th) * sp.cos(th) * px
        + (1 + a) * sp.sin(th) ** 2 * py
        - R * a / I2 * sp.sin(th) * pph,
        pth,
        -a * (R * sp.cos(th) * px + R * sp.sin(th) * py + pph),
    ]
    assert all(is_zero(u - v) for u, v in zip(p, expected, strict=True))
    # pi~ lands in Mbar (W g^-1 p = 0) and H o pi~ = h_2
    pv = sp.Matrix(p)
    assert all(is_zero(e) for e in vh.W * vh.metric.inv() * pv)
    assert is_zero((pv.T * vh.metric.inv() * pv)[0, 0] / 2 - vh.h2)


@pytest.mark.parametrize("which", ["disk", "particle_x", "t3"])
def test_h2_is_the_sub_riemannian_hamiltonian_of_D(which: str) -> None:
    """Derived (digest B.2.4): h_2 = 1/2 phat^T X (X^T g X)^-1 X^T phat + U, X a frame of D."""
    S, vh = {"disk": disk, "particle_x": lambda: particle("x"), "t3": t3}[which]()
    X = S.frame
    ph = sp.Matrix(vh.p_hat)
    alt = (ph.T * X * (X.T * S.metric * X).inv() * X.T * ph)[0, 0] / 2 + S.potential
    diff = sp.expand_trig(vh.h2 - alt)
    for seed in range(3):  # exact rational points; cos, sin on the rational unit circle
        t = sp.Rational(seed + 1, 5)
        c, s = (1 - t**2) / (1 + t**2), 2 * t / (1 + t**2)
        pt = {sp.cos(a): c for a in S.q}
        pt.update({sp.sin(a): s for a in S.q})
        num = {a: sp.Rational(seed + k + 2, 7) for k, a in enumerate([*S.q, *vh.p_hat, *S.params])}
        assert sp.cancel(diff.subs(pt).subs(num)) == 0


def test_hamiltonian_flow_equals_lagrangian_rates() -> None:
    """(c) == (a): along X_{h_2}, d qdot/dt and d lambda/dt equal C (15) and B (14)
    (exact, at random rational points of (q, phat) with rational cos/sin)."""
    S, vh = disk()
    eq = vakonomic_equations(S)
    n = S.dim
    qd_syms, lam_syms = eq.states[n : 2 * n], eq.states[2 * n :]
    qdot = vh.velocities()
    sub = dict(zip(qd_syms, qdot, strict=True))
    sub.update(dict(zip(lam_syms, vh.lam_on_M2, strict=True)))
    th = S.q[2]
    checks = [
        (
            sp.expand_trig(poisson_bracket(expr, vh.h2, vh.q, vh.p_hat)),
            sp.expand_trig(rate.subs(sub)),
        )
        for expr, rate in zip([*qdot, *vh.lam_on_M2], eq.rhs[n:], strict=True)
    ]
    for k, (c, s) in enumerate(
        [(sp.Rational(3, 5), sp.Rational(4, 5)), (sp.Rational(-5, 13), sp.Rational(12, 13))]
    ):
        pt = {sp.cos(th): c, sp.sin(th): s}
        vals = [sp.Rational(k + 2, 3), sp.Rational(-1, 7), sp.Rational(5, 4), sp.Rational(2, 9)]
        num = dict(zip(vh.p_hat, vals, strict=True))
        num.update(
            dict(
                zip(
                    S.params,
                    [sp.Rational(7, 10), sp.Rational(13, 10), sp.Rational(1, 2)],
                    strict=True,
                )
            )
        )
        for a, b in checks:
            assert sp.simplify(a.subs(pt).subs(num) - b.subs(pt).subs(num)) == 0


# ------------------------------------------------------------------- the bracket ----
def test_t3_bracket_true_value_dirac_and_printed_18_differ() -> None:
    """On T3 (N != 0): eliminate-then-bracket equals the Dirac bracket; (18) read literally
    gives a different value (digest: 284239984/1336449005 versus -730685362/1336449005)."""
    S, vh = t3()
    x, y, z = S.q
    assert not all(is_zero(e) for e in vh.N())
    pt = {x: sp.Rational(3, 7), y: sp.Rational(-5, 7), z: sp.Rational(2, 3)}
    pt.update(
        dict(zip(vh.p_hat, [sp.Rational(1, 3), sp.Rational(-4, 5), sp.Rational(6, 7)], strict=True))
    )
    px, py, pz = vh.p
    true = sp.nsimplify(vh.vakonomic_bracket(px, pz).subs(pt))
    assert true == sp.Rational(284239984, 1336449005)
    # Dirac bracket of lambda-dependent extensions f(q, phat - lambda W) restricted to M_2
    ext = [vh.p_hat[A] - sum(vh.lam[i] * vh.W[i, A] for i in range(2)) for A in range(3)]
    dirac = sp.nsimplify(vh.dirac_bracket(ext[0], ext[2], at=pt))
    assert dirac == true
    # without the Dirac correction the canonical bracket of these extensions is different
    plain = sp.nsimplify(vh.on_M2(vh.bracket(ext[0], ext[2])).subs(pt))
    assert plain != true
    printed = sp.nsimplify(vh.printed_bracket_18(px, pz).subs(pt))
    assert printed == sp.Rational(-730685362, 1336449005)
    assert printed != true


def _disk_V14(S, vh):  # noqa: ANN001, ANN202
    """The 13 nonzero entries of digest V14 (seed 003, Example VII.4; phat on the right)."""
    x, y, th, ph = S.q
    I1, I2, R = S.params
    ppx, ppy, ppth, ppph = vh.p
    px, py, pth, pph = vh.p_hat
    s, c, k = sp.sin(th), sp.cos(th), I2 + R**2
    return {
        (x, ppx): R**2 * c**2 / k,
        (x, ppy): R**2 * sp.sin(2 * th) / (2 * k),
        (y, ppx): R**2 * sp.sin(2 * th) / (2 * k),
        (y, ppy): R**2 * s**2 / k,
        (x, ppph): I2 * R * c / k,
        (y, ppph): I2 * R * s / k,
        (th, ppth): sp.Integer(1),
        (ph, ppx): R * c / k,
        (ph, ppy): R * s / k,
        (ph, ppph): I2 / k,
        (ppx, ppth): R * (-R * px * sp.sin(2 * th) + R * py * sp.cos(2 * th) - pph * s) / k,
        (ppy, ppth): R * (R * px * sp.cos(2 * th) + R * py * sp.sin(2 * th) + pph * c) / k,
        (ppth, ppph): -I2 * R * (-px * s + py * c) / k,
    }


def test_disk_bracket_table_V14_and_dirac() -> None:
    """All 13 nonzero entries of V14 and the 15 zeros among the 28 pairs of
    (x, y, theta, phi, p_x, p_y, p_theta, p_phi); antisymmetry on every nonzero entry."""
    S, vh = disk()
    vb = vh.vakonomic_bracket
    table = _disk_V14(S, vh)
    assert len(table) == 13
    obs = [*S.q, *vh.p]
    zeros = 0
    for i, f in enumerate(obs):
        for g in obs[i + 1 :]:
            val = table.get((f, g), sp.Integer(0))
            assert _zero(vb(f, g) - val, S, vh), (f, g)
            zeros += val == 0
    assert zeros == 28 - 13
    for (f, g), val in table.items():  # {g, f} = -{f, g}
        assert _zero(vb(g, f) + val, S, vh), (g, f)
    # Prop. VII.1 on one entry with N = 0: Dirac bracket of lambda-dependent extensions
    ext = [vh.p_hat[A] - sum(vh.lam[i] * vh.W[i, A] for i in range(2)) for A in range(4)]
    assert _zero(vh.dirac_bracket(ext[0], ext[2]) - vb(vh.p[0], vh.p[2]), S, vh)


def _v13_operators(S, vh):  # noqa: ANN001, ANN202
    """Seed 003, Example VII.4: {f, H|Mbar}_vak as a derivation of F = f o pi~ (coefficients of
    dF/dx, dF/dy, dF/dtheta, dF/dphi, dF/dphat_theta): the digest's corrected V13 and the
    paper's printed formula (three errors, erratum F3)."""
    x, y, th, ph = S.q
    I1, I2, R = S.params
    px, py, pth, pph = vh.p_hat
    a = -I2 / (I2 + R**2)
    s, c, s2, c2 = sp.sin(th), sp.cos(th), sp.sin(2 * th), sp.cos(2 * th)
    correct = [
        (1 + a) * c**2 * px + (1 + a) * s * c * py - R * a / I2 * c * pph,
        (1 + a) * s * c * px + (1 + a) * s**2 * py - R * a / I2 * s * pph,
        pth / I1,
        -a / I2 * pph - R * a / I2 * (c * px + s * py),
        -(
            -(1 + a) * s2 * px**2
            + (1 + a) * s2 * py**2
            + 2 * (1 + a) * c2 * px * py
            + 2 * R * a / I2 * s * px * pph
            - 2 * R * a / I2 * c * py * pph
        )
        / 2,
    ]
    printed = [
        (1 + a) * c**2 * px + (1 + a) * s * c * py - 2 * R * a / I2 * c * pph,
        (1 + a) * s**2 * py + (1 + a) * s * c * px - 2 * R * a / I2 * s * pph,
        pth / I1,
        -(a / I2 * pph + R * a / I2 * c * px - R * a / I2 * s * py),
        -(
            -(1 + a) * s2 * px**2
            + (1 + a) * 2 * c2 * px * py
            + 2 * R * a / I2 * s * px * pph
            - 2 * R * a / I2 * c * py * pph
        )
        / 2,
    ]
    wrt = [x, y, th, ph, pth]

    def apply(coeffs):  # noqa: ANN001, ANN202
        return lambda F: sum((k * sp.diff(F, v) for k, v in zip(coeffs, wrt, strict=True)), 0)

    return apply(correct), apply(printed), correct


def test_disk_evolution_V13_and_printed_erratum_F3() -> None:
    """ḟ = {f, H|Mbar}_vak = {f o pi~, h_2}: for f = q^A it is dh_2/dphat_A, for f = p_theta it
    is -dh_2/dtheta (the digest's V13); the paper's printed coefficients fail exactly where the
    erratum F3 says: 2Ra/I2 in the x and y coefficients, the sign of the sin(theta) phat_y term in
    the phi coefficient, and the missing (1+a) sin(2 theta) phat_y^2 in the phat_theta one."""
    S, vh = disk()
    x, y, th, ph = S.q
    H = vh.hamiltonian()
    # H o pi~ = h_2 (so {f, H}_vak is the rate along X_h2)
    pt = vh.pi_tilde()
    assert _zero(H.subs(dict(zip(vh.p, pt, strict=True)), simultaneous=True) - vh.h2, S, vh)
    correct, printed, coeffs = _v13_operators(S, vh)
    rates = {f: vh.vakonomic_bracket(f, H) for f in [x, y, th, ph, vh.p[2]]}
    for k, f in enumerate([x, y, th, ph]):
        assert _zero(rates[f] - sp.diff(vh.h2, vh.p_hat[k]), S, vh), f  # = dh_2/dphat_A
        assert _zero(rates[f] - coeffs[k], S, vh), f
    assert _zero(rates[vh.p[2]] + sp.diff(vh.h2, th), S, vh)  # f = p_theta: -dh_2/dtheta
    assert _zero(rates[vh.p[2]] - coeffs[4], S, vh)
    # the corrected operator reproduces the bracket also where F depends on theta and phat
    for f in [vh.p[0], vh.p[3], vh.p[0] * sp.sin(th) - vh.p[1] * sp.cos(th)]:
        F = f.subs(dict(zip(vh.p, pt, strict=True)), simultaneous=True)
        assert _zero(vh.vakonomic_bracket(f, H) - correct(F), S, vh), f
    # the printed formula: right for theta, wrong for x, y (2Ra/I2), phi (sign), p_theta (term)
    I1, I2, R = S.params
    px, py, pth, pph = vh.p_hat
    a = -I2 / (I2 + R**2)
    assert _zero(printed(th) - rates[th], S, vh)
    assert _zero(printed(x) - rates[x] + R * a / I2 * sp.cos(th) * pph, S, vh)
    assert _zero(printed(y) - rates[y] + R * a / I2 * sp.sin(th) * pph, S, vh)
    assert _zero(printed(ph) - rates[ph] - 2 * R * a / I2 * sp.sin(th) * py, S, vh)
    assert _zero(printed(pth) - rates[vh.p[2]] - (1 + a) * sp.sin(2 * th) * py**2 / 2, S, vh)
    for f in [x, y, ph, pth]:
        assert not _zero(printed(f) - rates[f if f != pth else vh.p[2]], S, vh), f


def test_particle_charts_agree_P9_P10_P11_P13() -> None:
    Sx, vx = particle("x")
    Sz, vz = particle("z")
    x, y, z = Sx.q
    px, py, pz = vx.p_hat
    assert is_zero(vx.lam_on_M2[0] - (pz - y * px) / (x * (1 + y**2)))  # P9
    assert is_zero(vz.lam_on_M2[0] - (pz - y * px) / (z * (1 + y**2)))
    h2 = ((px + y * pz) ** 2 / (1 + y**2) + py**2) / 2  # P10
    assert is_zero(vx.h2 - h2) and is_zero(vz.h2 - h2)
    for a, b in zip(vx.pi_tilde(), vz.pi_tilde(), strict=True):  # P11
        assert is_zero(a - b)
    P = vx.p
    table = {  # P13: the 7 nonzero entries; every other pair of (x, y, z, p_x, p_y, p_z) is 0
        (x, P[0]): 1 / (1 + y**2),
        (x, P[2]): y / (1 + y**2),
        (z, P[0]): y / (1 + y**2),
        (y, P[1]): sp.Integer(1),
        (z, P[2]): y**2 / (1 + y**2),
        (P[0], P[1]): -(2 * px * y + pz * (y**2 - 1)) / (1 + y**2) ** 2,
        (P[1], P[2]): (px * (y**2 - 1) - 2 * pz * y) / (1 + y**2) ** 2,
    }
    obs = [x, y, z, *P]
    zeros = 0
    for i, f in enumerate(obs):
        for g in obs[i + 1 :]:
            val = table.get((f, g), sp.Integer(0))
            zeros += val == 0
            assert is_zero(vx.vakonomic_bracket(f, g) - val), (f, g)
            assert is_zero(vz.vakonomic_bracket(f, g) - val), (f, g)
    assert zeros == 15 - 7


def test_seed002_disk_through_the_algorithm() -> None:
    """Seed 002's disk (heading phi, mass M) also stops at step 2; D = W g^-1 W^T."""
    S = vertical_rolling_disk(convention="mestdag-crampin")
    vh = vakonomic_hamiltonian(S)
    M, I, J, R = S.params  # noqa: E741
    phi = S.q[2]
    assert vh.algorithm.stop_step == 2 and vh.algorithm.multipliers_determined
    D = sp.Matrix(
        [
            [1 / M + R**2 * sp.cos(phi) ** 2 / I, R**2 * sp.sin(phi) * sp.cos(phi) / I],
            [R**2 * sp.sin(phi) * sp.cos(phi) / I, 1 / M + R**2 * sp.sin(phi) ** 2 / I],
        ]
    )
    assert all(is_zero(e) for e in vh.D - D)
    assert not vh.integrable


def test_holonomic_constraints_flagged() -> None:
    vh = vakonomic_hamiltonian(holonomic_particle())
    assert vh.integrable and vh.algorithm.stop_step == 2


# --------------------------------------------------------- generic engine, degeneracy ----
def _toy():  # noqa: ANN202
    x, lam, px, pl = sp.symbols("x lambda p_x p_lambda", real=True)
    return x, lam, px, pl


def test_engine_stops_at_step_one_when_primary_is_preserved() -> None:
    x, lam, px, pl = _toy()
    res = dirac_bergmann(px**2 / 2 + x**2 / 2, [x, lam], [px, pl], [pl])
    assert res.stop_step == 1 and res.final_dimension == 3
    assert not res.multipliers_determined and not res.second_class  # lambdadot free


def test_engine_first_class_secondary() -> None:
    """H = lambda p_x: secondary p_x = 0, tertiary none; lambdadot undetermined."""
    x, lam, px, pl = _toy()
    res = dirac_bergmann(lam * px, [x, lam], [px, pl], [pl])
    assert res.stop_step == 2 and not res.multipliers_determined
    assert res.solution[px] == 0


def test_engine_errors() -> None:
    x, lam, px, pl = _toy()
    with pytest.raises(ConstraintAlgorithmError, match="did not stop within max_steps=1"):
        dirac_bergmann(px**2 / 2 + (px - lam) ** 2 / 2, [x, lam], [px, pl], [pl], max_steps=1)
    with pytest.raises(ConstraintAlgorithmError, match="constraint set is empty"):
        dirac_bergmann(px**2 / 2 + lam, [x, lam], [px, pl], [pl])
    with pytest.raises(ConstraintAlgorithmError, match="singular"):
        dirac_bergmann(lam * px, [x, lam], [px, pl], [pl], solve_for=[pl, lam])
    with pytest.raises(ConstraintAlgorithmError, match="did not stop"):
        vakonomic_hamiltonian(contact_particle(), max_steps=1)
    with pytest.raises(ValueError, match="primary must hold"):
        dirac_bergmann(px, [x], [px], [])
    with pytest.raises(ValueError, match="max_steps must be a positive integer"):
        dirac_bergmann(px, [x, lam], [px, pl], [pl], max_steps=0)


def test_singular_D_raises() -> None:
    """A rank-deficient constraint basis makes D = W g^-1 W^T singular: refused."""
    S = contact_particle()
    x, y, z = S.q
    S.constraint_forms = sp.Matrix([[-y, 0, 1], [-2 * y, 0, 2]])  # same 1-form twice
    with pytest.raises(ConstraintAlgorithmError, match="D = W g\\^-1 W\\^T .* singular"):
        vakonomic_hamiltonian(S)
