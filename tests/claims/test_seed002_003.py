"""Claims of seeds 002 (Mestdag & Crampin 2010) and 003 (Martinez, Cortes & de Leon 2000).

Every test names the claim IDs of the claims table it checks (002-n, 003-n).  Oracles are the
seeds' printed formulas (with the errata of the digest ``spec/seed002_003.md`` section E, each
re-derived here: the corrected value passes and the printed one fails), exact SymPy identities,
and independent routes (Euler-Lagrange equations of a Lagrangian differentiated here, the
nonholonomic field of the package, the Hamiltonian side against the Lagrangian side).  Where a
check is done at points, the points are exact rationals (angles on the rational unit circle),
so the comparisons are exact.
"""

from __future__ import annotations

import functools

import sympy as sp

from nhfast.symbolic.systems import NonholonomicSystem
from nhfast.symbolic.vakonomic import (
    frame_data,
    nonholonomic_coordinate_equations,
    poisson_bracket,
    restriction_test,
    vakonomic_equations,
    vakonomic_frame_equations,
    vakonomic_hamiltonian,
)
from nhfast.symbolic.vakonomic.constraint_algorithm import (
    presymplectic_form,
    sode_multiplier_rates,
)
from nhfast.systems import (
    contact_particle,
    two_constraint_system,
    vertical_rolling_disk,
)

# ----------------------------------------------------------------------------- helpers ----


def _circle(t: sp.Rational) -> tuple[sp.Rational, sp.Rational]:
    return (1 - t**2) / (1 + t**2), 2 * t / (1 + t**2)


def _points(angles, others, n: int = 3, extra=None) -> list[dict]:  # noqa: ANN001
    """``n`` generic exact rational points as xreplace maps: cos/sin of each angle on the rational
    unit circle, the other symbols rational; ``extra(pt)`` may add dependent values."""
    out = []
    for k in range(n):
        trig, num = {}, {}
        for j, a in enumerate(angles):
            c, s = _circle(sp.Rational(k + j + 2, 2 * k + 3 * j + 7))
            trig[sp.cos(a)], trig[sp.sin(a)] = c, s
        for j, v in enumerate(others):
            num[v] = sp.Rational((-1) ** j * (3 * k + 5 * j + 4), 11 + 2 * j)
        if extra is not None:
            num.update(extra(trig, num))
        out.append((trig, num))
    return out


def _value(expr, pt) -> sp.Expr:  # noqa: ANN001
    trig, num = pt
    e = sp.expand_trig(sp.sympify(expr)).xreplace(trig).xreplace(num)
    return sp.cancel(e)


def _zero_at(expr, pts) -> bool:  # noqa: ANN001
    return all(_value(expr, pt) == 0 for pt in pts)


def _zero(expr) -> bool:  # noqa: ANN001
    return sp.cancel(sp.expand(sp.sympify(expr))) == 0


def _is0(expr) -> bool:  # noqa: ANN001
    """Exact zero test: structural after expansion, else at generic exact rational points (every
    trig argument a symbol, put on the rational unit circle), else ``simplify``."""
    e = sp.sympify(expr)
    if sp.expand(e) == 0:
        return True
    trig = e.atoms(sp.sin, sp.cos, sp.tan, sp.cot)
    angles = sorted({f.args[0] for f in trig}, key=str)
    if not all(a.is_Symbol for a in angles):
        return bool(sp.simplify(e) == 0)
    for a in angles:
        e = e.subs({sp.tan(a): sp.sin(a) / sp.cos(a), sp.cot(a): sp.cos(a) / sp.sin(a)})
    return _zero_at(e, _points(angles, sorted(e.free_symbols, key=str)))


def _wedge(terms, coords) -> sp.Matrix:  # noqa: ANN001
    """Matrix of sum c du^dv over ``terms`` = [(c, u, v)] (Omega[u, v] = c, Omega[v, u] = -c)."""
    idx = {z: i for i, z in enumerate(coords)}
    om = sp.zeros(len(coords), len(coords))
    for c, u, v in terms:
        om[idx[u], idx[v]] += c
        om[idx[v], idx[u]] -= c
    return om


@functools.cache
def _disk003():  # noqa: ANN202
    S = vertical_rolling_disk(convention="martinez")
    return S, vakonomic_hamiltonian(S)


@functools.cache
def _t3_system() -> NonholonomicSystem:
    """The digests' test system T3 with a potential (m = 2, N != 0)."""
    return two_constraint_system()


@functools.cache
def _t3():  # noqa: ANN202
    return _t3_system(), vakonomic_hamiltonian(_t3_system())


# ================================================================ seed 003, Section IV ====
def test_omega_L_formula_rank_and_kernel_003_3() -> None:
    """003-3: omega_calL = (d_B g_AC qdot^C + lambda^i d_B mu_iA) dq^A^dq^B + mu_iA dq^A^dlambda^i
    + g_BA dq^A^dqdot^B (Section IV); rank 2n; ker = span{Z_i, d/dlambdadot^i};
    dE(Z_i) = -Phi_i, dE(d/dlambdadot) = 0; on the disk the printed V2."""
    for S in (_t3_system(), vertical_rolling_disk(convention="martinez")):
        pf = presymplectic_form(S)
        n = S.dim
        m = S.dim - S.rank
        z = pf.coordinates
        q, lam, qd = z[:n], z[n : n + m], z[n + m : 2 * n + m]
        g, W = S.metric, S.constraint_forms
        terms = []
        for A in range(n):
            for B in range(n):
                c = sum((sp.diff(g[A, C], q[B]) * qd[C] for C in range(n)), sp.Integer(0))
                c += sum((lam[i] * sp.diff(W[i, A], q[B]) for i in range(m)), sp.Integer(0))
                terms += [(c, q[A], q[B]), (g[B, A], q[A], qd[B])]
            terms += [(W[i, A], q[A], lam[i]) for i in range(m)]
        seed = _wedge(terms, z)
        assert all(_zero(e) for e in pf.matrix - seed)
        pt = {s: sp.Rational(j + 2, j + 5) for j, s in enumerate([*z, *S.params])}
        assert pf.matrix.subs(pt).rank() == 2 * n  # rank omega_calL = 2n
        K = sp.Matrix.hstack(*pf.kernel)
        assert K.shape[1] == 2 * m and K.subs(pt).rank() == 2 * m
        assert all(_zero(e) for e in pf.matrix * K)  # so ker = span{Z_i, d/dlambdadot}
        grad = sp.Matrix([sp.diff(pf.energy, s) for s in z])
        dE = (grad.T * K).T
        for i in range(m):
            assert _zero(dE[i] + pf.constraints[i])  # dE(Z_i) = -Phi_i: P_2 = {Phi = 0}
            assert dE[m + i] == 0
    # V2 as printed (disk, rotated basis; (lambda, mu) = (lambda_1, lambda_2))
    x, y, th, ph, lam, mu, xd, yd, thd, phd = pf.coordinates[:10]
    I1, I2, R = S.params
    s, c = sp.sin(th), sp.cos(th)
    v2 = [
        (1, x, xd), (s, x, lam), (c, x, mu), (lam * c - mu * s, x, th),
        (1, y, yd), (-c, y, lam), (s, y, mu), (lam * s + mu * c, y, th),
        (I1, th, thd), (I2, ph, phd), (-R, ph, mu),
    ]  # fmt: skip
    assert all(_zero(e) for e in pf.matrix - _wedge(v2, pf.coordinates))


def test_particle_omega_both_charts_P2_003_22() -> None:
    """003-22: omega_phi and omega_psi of Example VIII.6 as printed (P2)."""
    printed = {
        "x": lambda x, y, z, lam: [(-x * y, x, lam), (-lam * x, x, y), (lam, z, x), (x, z, lam)],
        "z": lambda x, y, z, lam: [
            (-z * y, x, lam), (-lam * z, x, y), (-lam * y, x, z), (z, z, lam),
        ],
    }  # fmt: skip
    for chart, terms in printed.items():
        pf = presymplectic_form(contact_particle(chart))
        x, y, z, lam, xd, yd, zd, _ = pf.coordinates
        base = [(1, x, xd), (1, y, yd), (1, z, zd)]
        assert pf.matrix == _wedge(base + terms(x, y, z, lam), pf.coordinates), chart
    # the two charts' forms differ (different multipliers), as the paper notes
    assert presymplectic_form(contact_particle("x")).matrix != pf.matrix


# ------------------------------------------------------------- (14), (15), S and D^i ------
def _disk_P2_points(S, eq, n: int = 3) -> list:  # noqa: ANN001
    """Points of P_2 of the seed-003 disk: xdot = R phidot cos, ydot = R phidot sin."""
    x, y, th, ph = S.q
    qd, lam = eq.states[4:8], eq.states[8:]
    I1, I2, R = S.params

    def on_P2(trig, num):  # noqa: ANN001, ANN202
        return {
            qd[0]: num[R] * num[qd[3]] * trig[sp.cos(th)],
            qd[1]: num[R] * num[qd[3]] * trig[sp.sin(th)],
        }

    others = [x, y, th, ph, qd[2], qd[3], *lam, I1, I2, R]
    return _points([th], [*others], n, on_P2)


def test_disk_sode_multiplier_accelerations_V5_003_5() -> None:
    """003-5: on S = {lambdadot = B}, D^i = Gamma(B^i) is V5:
    D_lambda = -lambda thd^2 + (R^2/I1) lambda phd^2 + (R/I1) mu lambda phd,
    D_mu = a R phd thd^2 + a mu thd^2 + (aR/I1) lambda^2 phd (exact, points of P_2)."""
    S = vertical_rolling_disk(convention="martinez")
    sr = sode_multiplier_rates(S)
    eq = sr.equations
    I1, I2, R = S.params
    thd, phd = eq.states[6:8]
    lam, mu = eq.states[8:]
    a = -I2 / (I2 + R**2)
    V5 = [
        -lam * thd**2 + R**2 / I1 * lam * phd**2 + R / I1 * mu * lam * phd,
        a * R * phd * thd**2 + a * mu * thd**2 + a * R / I1 * lam**2 * phd,
    ]
    pts = _disk_P2_points(S, eq)
    for d, v in zip(sr.D_on_S, V5, strict=True):
        assert _zero_at(d - v, pts)
    # with lambdadot free, D differs from its value on S (S is a proper subset of P_2)
    assert not _zero_at(sr.D[0] - sr.D_on_S[0], pts)


def _particle_P2(chart: str):  # noqa: ANN202
    S = contact_particle(chart)
    sr = sode_multiplier_rates(S)
    x, y, z, xd, yd, zd, lam = sr.equations.states
    on = {zd: y * xd}  # P_2: zdot = y xdot
    return S, sr, (x, y, z, xd, yd, zd, lam), on


def test_particle_rates_P3_P4_and_erratum_F4_003_23() -> None:
    """003-23: B and C of Example VIII.6 on P_2 in both charts (P3, P4), exact; the printed
    C_x^psi = lambda y zdot - ... (erratum F4) fails, lambda z ydot - ... passes; the printed
    duplicate line "C_z^psi = -lambda z xdot" is not C_z^psi."""
    for chart in ("x", "z"):
        S, sr, (x, y, z, xd, yd, zd, lam), on = _particle_P2(chart)
        w = x if chart == "x" else z
        wd = xd if chart == "x" else zd
        k = xd + lam * w * y
        B = -lam * wd / w - yd * k / (w * (1 + y**2))
        C = [lam * w * yd - y * yd * k / (1 + y**2), -lam * w * xd, yd * k / (1 + y**2)]
        assert _zero((sr.B[0] - B).subs(on)), chart
        for A in range(3):
            assert _zero((sr.C[A] - C[A]).subs(on)), (chart, A)
    printed_Cx_psi = lam * y * zd - y * yd * k / (1 + y**2)
    assert not _zero((sr.C[0] - printed_Cx_psi).subs(on))
    assert not _zero((sr.C[2] - (-lam * z * xd)).subs(on))
    # the first-stage printed relations (before B is substituted) hold as printed
    assert _zero((sr.C[0] - ((lam * yd + y * sr.B[0]) * z + lam * y * zd)).subs(on))
    assert _zero((sr.C[2] - (-lam * y * xd - sr.B[0] * z)).subs(on))


def test_particle_D_lambda_P5_P6_and_erratum_F5_003_24() -> None:
    """003-24: D_lambda = Gamma(B) (lambdadot free) on P_2: the printed P5 (phi chart) holds; the
    psi chart holds with the digest's correction P6 and fails as printed (erratum F5)."""
    S, sr, (x, y, z, xd, yd, zd, lam), on = _particle_P2("x")
    Cx, Cy, _ = sr.C
    ld = sr.lambda_dot[0]
    u = 1 + y**2
    P5 = (
        -ld * (xd / x + y * yd / u)
        + (xd / x) ** 2 * (lam + yd / u)
        + 2 * y * xd * yd**2 / (x * u**2)
        + lam * yd**2 * (y**2 - 1) / u**2
        - Cx * (yd / (x * u) + lam / x)
        - Cy * (xd / (x * u) + lam * y / u)
    )
    assert _zero((sr.D[0] - P5).subs(on))
    S, sr, (x, y, z, xd, yd, zd, lam), on = _particle_P2("z")
    Cx, Cy, Cz = sr.C
    ld = sr.lambda_dot[0]
    common = (
        -ld * (zd / z + y * yd / u)
        + (zd / z) ** 2 * (lam + yd / (y * u))
        - lam / z * Cz
        - Cx * yd / (z * u)
        - Cy * (xd / (z * u) + lam * y / u)
    )
    P6 = common + 2 * y * xd * yd**2 / (z * u**2) + lam * yd**2 * (y**2 - 1) / u**2
    printed = common + 2 * y * yd**2 * (xd + lam * z * y) / u**2 - lam * yd**2 / u**2
    assert _zero((sr.D[0] - P6).subs(on))
    assert not _zero((sr.D[0] - printed).subs(on))


# ================================================================ seed 003, Section V =====
def test_disk_legendre_V8_h1_V9_and_erratum_F7_003_8() -> None:
    """003-8: FL (V8) and h_1 (V9) of the disk; in general h_1 o FL = E_L, so the printed
    h_1 = ... + U + U (erratum F7) is wrong by U (checked on T3 with a potential)."""
    S, vh = _disk003()
    x, y, th, ph = S.q
    I1, I2, R = S.params
    xd, yd, thd, phd = sp.symbols("xd yd thd phd", real=True)
    lam, mu = vh.lam
    s, c = sp.sin(th), sp.cos(th)
    V8 = [xd + lam * s + mu * c, yd - lam * c + mu * s, I1 * thd, I2 * phd - R * mu]
    assert all(_zero(a - b) for a, b in zip(vh.legendre_map([xd, yd, thd, phd]), V8, strict=True))
    px, py, pth, pph = vh.p_hat
    V9 = (
        (px - lam * s - mu * c) ** 2
        + (py + lam * c - mu * s) ** 2
        + pth**2 / I1
        + (pph + R * mu) ** 2 / I2
    ) / 2
    assert _zero(vh.h1 - V9)
    # h_1 o FL = E_L = 1/2 qdot g qdot + U, with a potential (T3)
    S3, v3 = _t3()
    qd = sp.symbols("u1:4", real=True)
    qv = sp.Matrix(qd)
    E = (qv.T * S3.metric * qv)[0, 0] / 2 + S3.potential
    to_FL = dict(zip(v3.p_hat, v3.legendre_map(qd), strict=True))
    assert _zero(v3.h1.subs(to_FL) - E)
    y = sp.Matrix(v3.p_hat) - v3.W.T * sp.Matrix(v3.lam)
    correct = (y.T * S3.metric.inv() * y)[0, 0] / 2 + S3.potential
    printed = correct + S3.potential  # "+ U(q) + U(q)"
    assert _zero(v3.h1 - correct)
    assert _zero(printed.subs(to_FL) - E - S3.potential) and not _zero(printed - v3.h1)


def test_particle_legendre_and_h1_both_charts_P8_003_25() -> None:
    """003-25: FL_phi: phat = (xdot - lambda x y, ydot, zdot + lambda x), FL_psi the same with
    x -> z; h_1^phi = 1/2[(phat_x + lambda x y)^2 + phat_y^2 + (phat_z - lambda x)^2] (psi:
    x -> z); h_1^psi o Lambdabar = h_1^phi (lambda -> (x/z) lambda); chi_i = -dh_1/dlambda^i and
    (z/x) chi_phi = chi_psi o Lambdabar (P9)."""
    out = {}
    for chart in ("x", "z"):
        S = contact_particle(chart)
        vh = vakonomic_hamiltonian(S)
        x, y, z = S.q
        w = x if chart == "x" else z
        (lam,) = vh.lam
        qd = sp.symbols("u1:4", real=True)
        FL = [qd[0] - lam * w * y, qd[1], qd[2] + lam * w]
        assert all(_zero(a - b) for a, b in zip(vh.legendre_map(qd), FL, strict=True))
        px, py, pz = vh.p_hat
        h1 = ((px + lam * w * y) ** 2 + py**2 + (pz - lam * w) ** 2) / 2
        assert _zero(vh.h1 - h1)
        chi = w * (-(px + lam * w * y) * y + pz - lam * w)
        assert _zero(vh.chi[0] - chi)
        out[chart] = (vh, lam)
    (vx, lx), (vz, lz) = out["x"], out["z"]
    assert vx.p_hat == vz.p_hat
    x, _, z = vx.q
    bar = {lz: x / z * lx}
    assert _zero(vz.h1.subs(bar) - vx.h1)
    assert _zero(z / x * vx.chi[0] - vz.chi[0].subs(bar))


# ================================================================ seed 003, Section VII ===
def test_dirac_matrix_N_formula_and_inverse_003_18() -> None:
    """003-18 on T3 (N != 0): C = ({phi_a, phi_b}) = [[0, D], [-D, N]] with {phat_i, chi_j} =
    D_ij; N_ij = {chi_i, chi_j} equals the paper's formula (Section VII) and the digest's value
    of N_12; C^-1 = [[D^-1 N D^-1, -D^-1], [D^-1, 0]]; all constraints second class."""
    S, vh = _t3()
    q, lam, ph = vh.q, vh.lam, vh.p_hat
    n, m = 3, 2
    g, W, D = S.metric, vh.W, vh.D
    gi = g.inv()
    cons = vh.constraint_functions()
    full = sp.Matrix(2 * m, 2 * m, lambda a, b: vh.bracket(cons[a], cons[b]))
    assert full[:m, :m] == sp.zeros(m, m)
    assert all(_zero(e) for e in full[:m, m:] - D) and all(_zero(e) for e in full[m:, :m] + D)
    Wg = W * gi  # Wg[i, C] = mu_iD g^{CD}

    def Nf(i: int, j: int) -> sp.Expr:
        out = sp.Integer(0)
        for A in range(n):
            for B in range(n):
                out += gi[A, B] * sum(
                    (
                        ph[C]
                        * (W[j, A] * sp.diff(Wg[i, C], q[B]) - W[i, A] * sp.diff(Wg[j, C], q[B]))
                        for C in range(n)
                    ),
                    sp.Integer(0),
                )
                out += gi[A, B] * sum(
                    (
                        lam[k]
                        * (W[i, A] * sp.diff(D[k, j], q[B]) - W[j, A] * sp.diff(D[k, i], q[B]))
                        for k in range(m)
                    ),
                    sp.Integer(0),
                )
        return out

    N = full[m:, m:]
    for i in range(m):
        for j in range(m):
            assert _zero(N[i, j] - Nf(i, j)), (i, j)
    x, y, _ = q
    l1, l2 = lam
    N12 = (
        l1 * x**4 * y - 16 * l1 * y + 2 * l2 * x**5 + 12 * l2 * x**3 + 8 * l2 * x
        + 8 * ph[1] * x - ph[2] * x**4 - 4 * ph[2] * x**2
    ) / (x**2 + 4) ** 2  # fmt: skip
    assert _zero(N[0, 1] - N12) and not _zero(N[0, 1])
    # on M_2 (the package's constraint_matrix) and the inverse, at exact rational points
    CM = vh.constraint_matrix()
    NM = N.subs(dict(zip(lam, vh.lam_on_M2, strict=True)))
    Cf = sp.BlockMatrix([[sp.zeros(m, m), D], [-D, NM]]).as_explicit()
    Di = D.inv()
    Cinv = sp.BlockMatrix([[Di * NM * Di, -Di], [Di, sp.zeros(m, m)]]).as_explicit()
    for k in range(3):
        pt = {s: sp.Rational(3 * k + j + 1, 7 + j) for j, s in enumerate([*q, *ph, *S.params])}
        assert (CM - Cf).subs(pt) == sp.zeros(2 * m, 2 * m)
        assert (CM * Cinv).subs(pt).applyfunc(sp.cancel) == sp.eye(2 * m)
        assert NM.subs(pt)[0, 1] != 0
    assert vh.algorithm.second_class


# ===================================================== Example VII.4: multipliers, C4 =====
def test_disk_multipliers_closed_form_and_pendulum_V6_V15_C4_002_17() -> None:
    """003-6, 003-14 and 002-17 (C4), exact: along every VAK motion of the disk
    A = lambda sin(theta) + (mu + R phidot) cos(theta), B = -lambda cos(theta) + (mu + R phidot)
    sin(theta) are constant (so lambda = A sin - B cos, mu = A cos + B sin - R phidot, V6), and
    thetaddot = (R/I1)(A sin(theta) - B cos(theta)) phidot; on M_2, A = phat_x, B = phat_y and
    (I2 + R^2) phidot = phat_phi + R(A cos + B sin); h_2, phat_x, phat_y, phat_phi conserved."""
    S = vertical_rolling_disk(convention="martinez")
    eq = vakonomic_equations(S, simplify=sp.cancel)
    x, y, th, ph, xd, yd, thd, phd, lam, mu = eq.states
    I1, I2, R = S.params
    rate = dict(zip(eq.states, eq.rhs, strict=True))

    def d_dt(f):  # noqa: ANN001, ANN202
        return sum((sp.diff(f, s) * rate[s] for s in eq.states), sp.Integer(0))

    s, c = sp.sin(th), sp.cos(th)
    A = lam * s + (mu + R * phd) * c
    B = -lam * c + (mu + R * phd) * s
    pts = _disk_P2_points(S, eq)
    assert _zero_at(d_dt(A), pts) and _zero_at(d_dt(B), pts)
    assert _is0(A * s - B * c - lam)
    assert _is0(A * c + B * s - R * phd - mu)
    # errata F1, F2 (the rates themselves are test_disk003_rates_match_seed_003_V3_V4): the
    # tangency Gamma(phi_c) = C_x sin - C_y cos + R thetadot phidot = 0 holds, with the printed
    # "R theta phidot" it does not; lambdadot = thetadot (R phidot + mu), not the printed
    # thetadot (R phidot + mudot)
    tang = rate[xd] * s - rate[yd] * c
    assert _zero_at(tang + R * thd * phd, pts) and not _zero_at(tang + R * th * phd, pts)
    assert _zero_at(rate[lam] - thd * (R * phd + mu), pts)
    assert not _zero_at(rate[lam] - thd * (R * phd + rate[mu]), pts)
    # C4: the pendulum-like reduced system
    assert _zero_at(rate[thd] - R / I1 * (A * s - B * c) * phd, pts)
    # Hamiltonian side: A = phat_x, B = phat_y on M_2, and the first integrals (V15)
    _, vh = _disk003()
    px, py, pth, pph = vh.p_hat
    lm, mm = vh.lam_on_M2
    qdot = vh.velocities()
    on_M2 = {lam: lm, mu: mm, phd: qdot[3], th: vh.q[2]}
    assert _is0(A.subs(on_M2, simultaneous=True) - px)
    assert _is0(B.subs(on_M2, simultaneous=True) - py)
    assert _is0((I2 + R**2) * qdot[3] - pph - R * (px * c + py * s))
    for f in (px, py, pph, vh.h2):
        assert poisson_bracket(f, vh.h2, vh.q, vh.p_hat) == 0
    E = ((I2 + R**2) * qdot[3] ** 2 + I1 * qdot[2] ** 2) / 2
    assert _is0(sp.expand_trig(E - vh.h2))


# =============================================================================== seed 002 ==
@functools.cache
def _disk002():  # noqa: ANN202
    S = vertical_rolling_disk(convention="mestdag-crampin")
    return S, nonholonomic_coordinate_equations(S, simplify=sp.cancel)


def _nh_on_C(S, eq):  # noqa: ANN001, ANN202
    """(velocity symbols, accelerations, map onto C) of the seed-002 NH field."""
    x, y, phi, th = S.q
    M, I, J, R = S.params  # noqa: E741
    xd, yd, phd, thd = eq.states[4:]
    on_C = {xd: R * sp.cos(phi) * thd, yd: R * sp.sin(phi) * thd}
    return (xd, yd, phd, thd), list(eq.rhs[4:]), on_C


def test_disk_reaction_rho_O3_002_3() -> None:
    """002-3: rho R thetadot = I thetadot phidot + R M cos(phi) yddot - R M sin(phi) xddot (Sec. 1)
    on the NH motions gives rho = (I + M R^2) phidot / R; with nu_1 = lambda_1 + rho sin(phi)
    thetadot, nu_2 = lambda_2 - rho cos(phi) thetadot the fifth Euler law holds."""
    S, eq = _disk002()
    x, y, phi, th = S.q
    M, I, J, R = S.params  # noqa: E741
    (xd, yd, phd, thd), acc, on_C = _nh_on_C(S, eq)
    xdd, ydd = (acc[0].subs(on_C), acc[1].subs(on_C))
    rho = (I * thd * phd + R * M * sp.cos(phi) * ydd - R * M * sp.sin(phi) * xdd) / (R * thd)
    assert _is0(rho - (I + M * R**2) * phd / R)
    l1, l2 = (eq.observables["reaction_1"].subs(on_C), eq.observables["reaction_2"].subs(on_C))
    assert _is0(l1 - M * xdd) and _is0(l2 - M * ydd)  # (1.1)
    nu1 = l1 + rho * sp.sin(phi) * thd
    nu2 = l2 - rho * sp.cos(phi) * thd
    euler5 = I * thd * phd - (-R * nu2 * sp.cos(phi) + R * nu1 * sp.sin(phi))
    assert _is0(euler5)
    # third Euler law: I thetaddot = -R nu1 cos - R nu2 sin with thetaddot = 0 on NH motions
    assert _is0(acc[3] + (R * nu1 * sp.cos(phi) + R * nu2 * sp.sin(phi)) / I)


def _closed_form(t, u_th, u_ph, u_x, u_y, R):  # noqa: ANN001, ANN202
    th0, ph0, x0, y0 = sp.Rational(1, 3), sp.Rational(2, 7), sp.Rational(-1, 2), sp.Rational(3, 4)
    th = u_th * t + th0
    ph = u_ph * t + ph0
    x = u_th / u_ph * R * sp.sin(ph) + u_x * t + x0
    y = -u_th / u_ph * R * sp.cos(ph) + u_y * t + y0
    return x, y, ph, th


def test_sodes_contain_the_nh_solutions_O2_O4_O5_002_2_002_4() -> None:
    """002-2, 002-4: the closed form (O2) solves the NH equations (1.2) exactly (circle of radius
    |R u_theta/u_phi|; the line for u_phi = 0); the SODEs (2.3), (2.4), (2.5) agree with the
    package's NH field on C, so contain every NH solution; (2.3) has the extra solutions of O5,
    which satisfy the constraints iff u_x = u_y = 0."""
    S, eq = _disk002()
    M, I, J, R = S.params  # noqa: E741
    (xd, yd, phd, thd), acc, on_C = _nh_on_C(S, eq)
    phi = S.q[2]
    s, c = sp.sin(phi), sp.cos(phi)
    sodes = {
        "2.3": [-R * s * thd * phd, R * c * thd * phd, 0, 0],
        "2.4": [-s / c * xd * phd, c / s * yd * phd, 0, 0],
        "2.5": [-yd * phd, xd * phd, 0, 0],
    }
    for name, f in sodes.items():
        for k in range(4):
            assert _is0((f[k] - acc[k]).subs(on_C)), (name, k)
    t = sp.Symbol("t", real=True)
    u_th, u_ph, u_x, u_y = sp.symbols("u_theta u_phi u_x u_y", real=True, nonzero=True)
    x, y, ph, th = _closed_form(t, u_th, u_ph, u_x, u_y, R)
    d1 = [sp.diff(e, t) for e in (x, y, ph, th)]
    d2 = [sp.diff(e, t, 2) for e in (x, y, ph, th)]
    vel = {xd: d1[0], yd: d1[1], phd: d1[2], thd: d1[3], phi: ph}
    res23 = [sp.simplify(d2[k] - sp.sympify(sodes["2.3"][k]).subs(vel)) for k in range(4)]
    assert res23 == [0, 0, 0, 0]  # every u_x, u_y: extra solutions (O5)
    vx = sp.simplify(d1[0] - R * sp.cos(ph) * d1[3])
    vy = sp.simplify(d1[1] - R * sp.sin(ph) * d1[3])
    assert (vx, vy) == (u_x, u_y)  # constraints hold iff u_x = u_y = 0
    # erratum E2: the printed "xdot = cos(phi) thetadot" (no R) does not single them out
    assert not _is0(d1[0] - sp.cos(ph) * d1[3] - u_x)
    nh = {u_x: 0, u_y: 0}
    for name in ("2.4", "2.5"):
        for k in range(4):
            r = (d2[k] - sp.sympify(sodes[name][k]).subs(vel)).subs(nh)
            assert _is0(r), (name, k)
    # O2: the NH motion is a circle about (x0, y0) of radius |R u_theta / u_phi|
    x0, y0 = _closed_form(0, u_th, u_ph, 0, 0, R)[0].subs(R, 0), sp.Rational(3, 4)
    r2 = sp.simplify((x.subs(nh) - x0) ** 2 + (y.subs(nh) - y0) ** 2)
    assert _is0(r2 - (R * u_th / u_ph) ** 2)
    # u_phi = 0: the line x = R cos(phi0) u_theta t + x0 solves the NH equations
    xl = R * sp.cos(sp.Rational(2, 7)) * u_th * t
    yl = R * sp.sin(sp.Rational(2, 7)) * u_th * t
    vl = {xd: sp.diff(xl, t), yd: sp.diff(yl, t), phd: 0, thd: u_th, phi: sp.Rational(2, 7)}
    assert sp.diff(xl, t, 2) == acc[0].subs(vl) and sp.diff(yl, t, 2) == acc[1].subs(vl)
    assert _is0(sp.diff(xl, t) - R * sp.cos(sp.Rational(2, 7)) * u_th)


def _el_residual(L, q, qd, f) -> list:  # noqa: ANN001
    """Euler-Lagrange expressions of L(q, qd) with qddot = f substituted."""
    out = []
    for j in range(len(q)):
        pj = sp.diff(L, qd[j])
        dt = sum((sp.diff(pj, q[k]) * qd[k] + sp.diff(pj, qd[k]) * f[k]) for k in range(len(q)))
        out.append(dt - sp.diff(L, q[j]))
    return out


def test_inverse_problem_lagrangians_O6_002_5() -> None:
    """002-5: L_a and L_b (printed constant c = sqrt(I + M R^2)/2, any c works) are Lagrangians of
    (2.4), L_c of (2.5): EL residual at qddot = f is 0; Hessian determinants
    16 c^3/(phidot^3 sin 2phi), 2(I + M R^2)/(phidot^2 sin 2phi) at the paper's c, -1/phidot^2."""
    x, y, phi, th = sp.symbols("x y phi theta", real=True)
    xd, yd, phd, thd = sp.symbols("xd yd phd thd", real=True)
    M, I, R, c = sp.symbols("M I R c", positive=True)  # noqa: E741
    q, qd = [x, y, phi, th], [xd, yd, phd, thd]
    f24 = [-sp.tan(phi) * xd * phd, sp.cot(phi) * yd * phd, 0, 0]
    f25 = [-yd * phd, xd * phd, 0, 0]
    cp = sp.sqrt(I + M * R**2) / 2
    La = phd**2 / 2 + c * (thd**2 / phd + xd**2 / (sp.cos(phi) * phd) + yd**2 / (sp.sin(phi) * phd))
    Lb = phd**2 / 2 + thd**2 / 2 - c * (xd**2 / (sp.cos(phi) * phd) + yd**2 / (sp.sin(phi) * phd))
    Lc = (
        phd**2 / 2
        + thd**2 / 2
        + ((xd**2 - yd**2) * sp.cos(phi) + 2 * xd * yd * sp.sin(phi)) / (2 * phd)
    )
    for L, f in ((La, f24), (Lb, f24), (La.subs(c, cp), f24), (Lc, f25)):
        assert all(_is0(r) for r in _el_residual(L, q, qd, f))
    # non-vacuity: L_c is not a Lagrangian of (2.4)
    assert not all(_is0(r) for r in _el_residual(Lc, q, qd, f24))
    hess = {k: sp.hessian(L, qd).det() for k, L in (("a", La), ("b", Lb.subs(c, cp)), ("c", Lc))}
    assert _is0(hess["a"] - 16 * c**3 / (phd**3 * sp.sin(2 * phi)))
    assert _is0(hess["b"] - 2 * (I + M * R**2) / (phd**2 * sp.sin(2 * phi)))
    assert _is0(hess["c"] + 1 / phd**2)


def test_fernandez_bloch_lagrangian_O7_O8_and_erratum_E3_002_6_002_7() -> None:
    """002-6, 002-7: the FB Lagrangian equals L - (dL/dxdot) v^x - (dL/dydot) v^y (2.6); its
    EL equations are the printed ones with thetadot (not theta: erratum E3) in the first; det Hess
    = J M^2 (I + M R^2); on C they reduce to (2.3), i.e. to the package's NH field."""
    S, eq = _disk002()
    M, I, J, R = S.params  # noqa: E741
    x, y, phi, th = S.q
    (xd, yd, phd, thd), acc, on_C = _nh_on_C(S, eq)
    q, qd = [x, y, phi, th], [xd, yd, phd, thd]
    s, c = sp.sin(phi), sp.cos(phi)
    L = M * (xd**2 + yd**2) / 2 + I * thd**2 / 2 + J * phd**2 / 2
    vx, vy = xd - R * c * thd, yd - R * s * thd
    FB = (
        -M * (xd**2 + yd**2) / 2 + I * thd**2 / 2 + J * phd**2 / 2 + M * R * thd * (c * xd + s * yd)
    )
    assert sp.expand(L - sp.diff(L, xd) * vx - sp.diff(L, yd) * vy - FB) == 0  # (2.6)
    H = sp.hessian(FB, qd)
    assert _is0(H.det() - J * M**2 * (I + M * R**2))
    qdd = sp.symbols("a1:5")
    el = [
        sum((sp.diff(sp.diff(FB, qd[j]), q[k]) * qd[k] + H[j, k] * qdd[k]) for k in range(4))
        - sp.diff(FB, q[j])
        for j in range(4)
    ]
    sol = sp.solve(el, qdd, dict=True)[0]
    xdd, ydd, phdd, thdd = (sol[a] for a in qdd)
    Sg = s * xd - c * yd
    K = I + M * R**2
    assert _is0(J * phdd + M * R * Sg * thd)  # thetadot: correct
    assert not _is0(J * phdd + M * R * Sg * th)  # printed "theta": wrong (E3)
    assert _is0(K * thdd - M * R * Sg * phd)
    assert _is0(K * xdd - (-R * K * s * thd * phd + M * R**2 * c * Sg * phd))
    assert _is0(K * ydd - (R * K * c * thd * phd + M * R**2 * s * Sg * phd))
    for k, a in enumerate((xdd, ydd, phdd, thdd)):
        assert _is0((a - acc[k]).subs(on_C)), k


def test_frame_metric_and_schur_complement_O12_002_11() -> None:
    """002-11: frame metric of X = (d/dphi, d/dtheta + R cos d/dx + R sin d/dy, d/dx, d/dy) is O12;
    det(g_ab - g^{alpha beta} g_a alpha g_b beta) = I M^2 / (I + M R^2) != 0."""
    S = vertical_rolling_disk(convention="mestdag-crampin")
    M, I, J, R = S.params  # noqa: E741
    phi = S.q[2]
    s, c = sp.sin(phi), sp.cos(phi)
    F = sp.Matrix([[1, 0], [0, 1], [0, 0], [0, 0]])
    gf = vakonomic_frame_equations(S, complement=F, simplify=sp.cancel).frame_metric
    O12 = sp.Matrix(
        [[J, 0, 0, 0], [0, I + M * R**2, M * R * c, M * R * s], [0, M * R * c, M, 0],
         [0, M * R * s, 0, M]]
    )  # fmt: skip
    assert all(_is0(e) for e in gf - O12)
    schur = gf[2:, 2:] - gf[2:, :2] * gf[:2, :2].inv() * gf[:2, 2:]
    assert _is0(schur.det() - I * M**2 / (I + M * R**2))


def test_wrong_section_residuals_EL_alpha_EL_a_002_13() -> None:
    """002-13 (proof of Prop. 2): for a section phi_a that fails, the EL expressions of
    Ltilde = L - Phi_a v^a on the NH motions, in the frame, are EL_alpha = -phi_a R^a_{alpha beta}
    v^beta and EL_a = lambda_a - Gamma(phi_a) - phi_b R^b_{a alpha} v^alpha (R^x_12 = -R sin,
    R^y_12 = R cos, R^b_{a alpha} = 0, Gamma = 0, lambda = (-M R sin, M R cos) phidot thetadot)."""
    S = vertical_rolling_disk(convention="mestdag-crampin")
    M, I, J, R = S.params  # noqa: E741
    phi = S.q[2]
    s, c = sp.sin(phi), sp.cos(phi)
    fd = frame_data(S, complement=sp.Matrix([[1, 0], [0, 1], [0, 0], [0, 0]]))
    v1, v2 = fd.v[:2]  # phidot, thetadot
    for sec in ([0, 0], [2 * v2, 3 * v1], [M * R * c * v2 + v1, 0]):
        rt = restriction_test(S, section=sec, fd=fd)
        assert not rt.holds
        phx, phy = (sp.sympify(e) for e in sec)
        w = phx * (-R * s) + phy * (R * c)  # phi_a R^a_12
        EL_alpha = [-w * v2, w * v1]  # alpha = 1 (beta = 2), alpha = 2 (beta = 1)
        lam = [-M * R * s * v1 * v2, M * R * c * v1 * v2]
        EL_a = [lam[0] - fd.flow(phx), lam[1] - fd.flow(phy)]
        el = sp.Matrix(rt.conditions["EL(Ltilde) on NH"])  # coordinate components
        frame_el = fd.X.T * el  # EL_i = X_i^A EL_A
        for got, want in zip(frame_el, EL_alpha + EL_a, strict=True):
            assert _is0(got - want), sec
        for got, want in zip(rt.conditions["(S5-2)"], EL_alpha, strict=True):
            assert _is0(got + want)
        for got, want in zip(rt.conditions["(S5-3)"], EL_a, strict=True):
            assert _is0(got + want)


def test_four_nonholonomic_routes_agree_C3_002_16() -> None:
    """002-16 (C3): the NH disk field on C from (1.2) (coordinates), Prop. 1 (frame: Gamma^alpha
    = 0), the FB Lagrangian restricted to C, and seed 003's X_(0,0) (lambda = 0, mu = -R phidot,
    unit mass; names theta <-> phi swapped) are the same field."""
    S, eq = _disk002()
    M, I, J, R = S.params  # noqa: E741
    x, y, phi, th = S.q
    (xd, yd, phd, thd), acc, on_C = _nh_on_C(S, eq)
    route1 = [sp.cancel(a.subs(on_C)) for a in acc]
    want = [-R * sp.sin(phi) * thd * phd, R * sp.cos(phi) * thd * phd, 0, 0]
    assert all(_is0(a - b) for a, b in zip(route1, want, strict=True))
    fd = frame_data(S, complement=sp.Matrix([[1, 0], [0, 1], [0, 0], [0, 0]]))
    assert list(fd.gamma) == [0, 0]  # route 2: vdot^alpha = 0; qddot = d/dt (X_alpha v^alpha)
    v1, v2 = fd.v[:2]
    qdot = fd.X[:, :2] * sp.Matrix([v1, v2])
    route2 = [sum(sp.diff(e, s_) * d for s_, d in zip(S.q, qdot, strict=True)) for e in qdot]
    back = {v1: phd, v2: thd}
    diffs = [sp.sympify(e).subs(back) - r for e, r in zip(route2, route1, strict=True)]
    assert all(_is0(d) for d in diffs)
    # route 3 (FB) is asserted equal to route 1 in test_fernandez_bloch_...; repeated compactly
    FB = -M * (xd**2 + yd**2) / 2 + I * thd**2 / 2 + J * phd**2 / 2
    FB += M * R * thd * (sp.cos(phi) * xd + sp.sin(phi) * yd)
    qd = [xd, yd, phd, thd]
    H = sp.hessian(FB, qd)
    rhs = sp.Matrix(
        [
            sp.diff(FB, S.q[j]) - sum(sp.diff(sp.diff(FB, qd[j]), S.q[k]) * qd[k] for k in range(4))
            for j in range(4)
        ]
    )
    route3 = [e.subs(on_C) for e in H.LUsolve(rhs)]
    assert all(_is0(a - b) for a, b in zip(route3, route1, strict=True))
    # route 4: seed 003 with (A, B) = (0, 0), M = 1, J = I1, I = I2
    S3 = vertical_rolling_disk(convention="martinez")
    e3 = vakonomic_equations(S3, simplify=sp.cancel)
    X, Y, TH, PH, XD, YD, THD, PHD, LAM, MU = e3.states
    I1, I2, R3 = S3.params
    sub = {LAM: 0, MU: -R3 * PHD, XD: R3 * PHD * sp.cos(TH), YD: R3 * PHD * sp.sin(TH)}
    route4 = [e.subs(sub) for e in e3.rhs[4:8]]  # (xdd, ydd, heading, rolling)
    ren = {TH: phi, PH: th, THD: phd, PHD: thd, R3: R, I1: J, I2: I}
    route4 = [sp.sympify(e).subs(ren, simultaneous=True) for e in route4]
    assert all(_is0(a - b) for a, b in zip(route4, route1, strict=True))
    # and lambda, mu stay at the special section: their rates vanish there / track -R phidot
    lam_rates = [e.subs(sub) for e in e3.rhs[8:]]
    assert _is0(lam_rates[0]) and _is0(lam_rates[1] + R3 * e3.rhs[7].subs(sub))


# ======================================================== Example VIII.6: charts, P7, P12 ===
def test_particle_charts_are_lambda_bar_related_P7_003_21() -> None:
    """003-21 (19), exact on P_2: with lambda_psi = (x/z) lambda_phi, C_psi = C_phi,
    B_psi = d/dt((x/z) lambda_phi) and D_psi = d^2/dt^2((x/z) lambda_phi) along the phi flow."""
    _, sx, (x, y, z, xd, yd, zd, lam), on = _particle_P2("x")
    _, sz, states_z, _ = _particle_P2("z")
    assert tuple(states_z) == (x, y, z, xd, yd, zd, lam)  # same symbols in both charts
    to_psi = {lam: x / z * lam}
    rate = dict(zip(sx.equations.states, sx.equations.rhs, strict=True))

    def d_dt(f):  # noqa: ANN001, ANN202
        return sum((sp.diff(f, s) * rate[s] for s in sx.equations.states), sp.Integer(0))

    for A in range(3):
        assert _zero((sz.C[A].subs(to_psi) - sx.C[A]).subs(on)), A
    lam_psi = x / z * lam
    assert _zero((sz.B[0].subs(to_psi) - d_dt(lam_psi)).subs(on))
    assert _zero((sz.D_on_S[0].subs(to_psi) - d_dt(d_dt(lam_psi))).subs(on))
    # non-vacuity: without the rescaling of lambda the charts' rates differ
    assert not _zero((sz.B[0] - sx.B[0]).subs(on))


def test_particle_hamilton_equations_P12_003_27() -> None:
    """003-27 (P12), exact: X_h2 is xdot = (phat_x + y phat_z)/(1+y^2), ydot = phat_y,
    zdot = y xdot, phat_x' = phat_z' = 0,
    phat_y' = (phat_x + y phat_z)(y phat_x - phat_z)/(1+y^2)^2;
    phat_x, phat_z and h_2 are conserved, in both charts."""
    for chart in ("x", "z"):
        vh = vakonomic_hamiltonian(contact_particle(chart))
        x, y, z = vh.q
        px, py, pz = vh.p_hat
        h2 = vh.h2
        u = 1 + y**2
        want_q = [(px + y * pz) / u, py, y * (px + y * pz) / u]
        want_p = [0, (px + y * pz) * (y * px - pz) / u**2, 0]
        for k in range(3):
            assert _zero(poisson_bracket(vh.q[k], h2, vh.q, vh.p_hat) - want_q[k]), (chart, k)
            assert _zero(poisson_bracket(vh.p_hat[k], h2, vh.q, vh.p_hat) - want_p[k]), (chart, k)
        assert all(_zero(a - b) for a, b in zip(vh.velocities(), want_q, strict=True))
        for f in (px, pz, h2):
            assert _zero(poisson_bracket(f, h2, vh.q, vh.p_hat))
