"""Symbolic NH/VAK comparison tests against seeds 000, 001 and 002 (all trajectories)."""

from __future__ import annotations

import pytest
import sympy as sp

from nhfast.symbolic.equations import hamel_equations
from nhfast.symbolic.systems import NonholonomicSystem
from nhfast.symbolic.vakonomic import (
    consistency_test,
    frame_data,
    is_integrable,
    nonholonomic_data,
    restriction_test,
    unconstrained_test,
    vakonomic_is_nonholonomic,
    vakonomic_test,
)
from nhfast.systems import holonomic_particle
from nhfast.systems.wheeled import carriage_constants, two_wheeled_carriage, unicycle


def _zero(e) -> bool:
    return sp.simplify(e) == 0


def _special_l(cc):
    return sp.solve(sp.Eq(cc["X"] * cc["Y"], 1), cc["l"])


# ------------------------------------------------------------------ unicycle (seed 000 6.1)
@pytest.mark.parametrize("potential", [None, lambda x, y, phi, th: sp.cos(phi) + th**2 / 2])
def test_unicycle_every_nh_trajectory_is_vak(potential):
    """Q1 yes, multiplier f = m alpha, g = 0 (O-U4: raw mu = (-m alpha, 0)); also with
    U(phi, theta)."""
    sys_ = unicycle(potential, as_chaplygin=False)
    vt = vakonomic_test(sys_)
    assert vt.holds and not vt.integrable
    m = sys_.params[0]
    alpha = vt.data["nh"].v[0]
    assert [
        sp.simplify(a - b) for a, b in zip(vt.data["multiplier"], [-m * alpha, 0], strict=True)
    ] == [0, 0]


def test_unicycle_nh_equations_and_unconstrained_condition():
    """O-U2 and O-U7: alphadot = -R U_theta/(m R^2 + I), phiddot = -U_phi/J;
    lambda ~ m alpha phidot."""
    th = sp.Symbol("theta", real=True)
    phi = sp.Symbol("phi", real=True)
    U = sp.cos(phi) + th**2 / 2
    sys_ = unicycle(U, as_chaplygin=False)
    m, R, I, J = sys_.params  # noqa: E741
    d = nonholonomic_data(sys_)
    assert _zero(d.vdot[0] + R * th / (m * R**2 + I))
    assert _zero(d.vdot[1] - sp.sin(phi) / J)
    free = unconstrained_test(unicycle(as_chaplygin=False))
    a, w = free.data["nh"].v
    assert not free.holds
    assert [sp.simplify(x) for x in free.obstruction] == [m * a * w]


@pytest.mark.parametrize("potential", [lambda x, y, phi, th: x, lambda x, y, phi, th: x**2 + y**2])
def test_unicycle_with_noninvariant_potential_is_not_vak(potential):
    """O-U6: potentials in x or y destroy Q1."""
    vt = vakonomic_test(unicycle(potential, as_chaplygin=False))
    assert not vt.holds and vt.obstruction and vt.data["multiplier"] is None


# ------------------------------------------------------------------ carriage (seed 000 6.2)
def test_carriage_nh_equations_match_seed000():
    """(6.2a,b): alphadot = X omega^2, omegadot = -Y alpha omega (corrected sign of seed 001)."""
    sys_ = two_wheeled_carriage(as_chaplygin=False)
    cc = carriage_constants(sys_)
    d = nonholonomic_data(sys_)
    a, w = d.v
    assert _zero(d.vdot[0] - cc["X"] * w**2)
    assert _zero(d.vdot[1] + cc["Y"] * a * w)
    h = hamel_equations(sys_)
    sub = dict(zip(h.states[-2:], d.v, strict=True))
    assert all(_zero(sp.sympify(e).subs(sub) - f) for e, f in zip(h.rhs[-2:], d.vdot, strict=True))


def test_carriage_vak_iff_l_zero_or_xy_one():
    """Seed 000: every NH trajectory is VAK iff l = 0 or XY = 1 (both checked with subs=)."""
    sys_ = two_wheeled_carriage(as_chaplygin=False)
    cc = carriage_constants(sys_)
    d = nonholonomic_data(sys_)
    l = cc["l"]  # noqa: E741
    assert vakonomic_test(sys_, subs={l: 0}, data=d).holds
    for val in _special_l(cc):
        vt = vakonomic_test(sys_, subs={l: val}, data=d)
        assert vt.holds, val
        assert vt.data["undetermined"] == 1  # multiplier of the closed form omega^3
        # O-C4: seed-000 multiplier f = (m - m0 l Y) alpha = -(2 I/R^2) alpha on omega^1; in the
        # forms of wheeled.py mu_seed1 = cos(theta) mu_1 + sin(theta) mu_2.
        th = sys_.q[4]
        mu = vt.data["multiplier"]
        alpha = d.v[0]
        f_seed = (cc["m"] - sys_.params[0] * val * cc["Y"].subs(l, val)) * alpha
        assert _zero(sp.cos(th) * mu[0] + sp.sin(th) * mu[1] + f_seed)


@pytest.mark.slow
def test_carriage_generic_obstruction_is_the_seed_factor():
    """Generic l: not VAK; the obstruction vanishes exactly at l = 0 and at XY = 1."""
    sys_ = two_wheeled_carriage(as_chaplygin=False)
    cc = carriage_constants(sys_)
    vt = vakonomic_test(sys_)
    assert not vt.holds and vt.obstruction
    l = cc["l"]  # noqa: E741
    for ob in vt.obstruction:
        assert _zero(ob.subs(l, 0))
        assert all(_zero(ob.subs(l, val)) for val in _special_l(cc))
        assert sp.degree(sp.factor(ob), l) == 3  # l (1 - XY): odd in l, nothing else in l


# ------------------------------------------------------------------ seed 001 consistency
@pytest.fixture(scope="module")
def carriage_frame():
    """The carriage in the adapted frame of seed 001 Sec. 7.2 (horizontal lifts and the
    fundamental fields of SE(2)); exact, over rational functions (a few seconds)."""
    sys_ = two_wheeled_carriage(as_chaplygin=True)
    x, y = sys_.q[2], sys_.q[3]
    F = sp.Matrix([[0, 0, 0], [0, 0, 0], [1, 0, -y], [0, 1, x], [0, 0, 1]])
    return sys_, frame_data(sys_, complement=F)


def test_carriage_consistency_with_momenta_iff_l_zero(carriage_frame):
    """Seed 001 Sec. 7.2: phi = p is consistent iff l = 0; (S5-2) = p_a R^a_12 v^2 with
    p_a R^a_12 = -K (v1 - v2) (the corrected sign)."""
    sys_, fd = carriage_frame
    cc = carriage_constants(sys_)
    assert consistency_test(sys_, fd=fd, subs={cc["l"]: 0}).holds
    ct = consistency_test(sys_, fd=fd)
    assert not ct.holds
    v1, v2 = fd.v[:2]
    s2 = ct.conditions["(S5-2)"]
    assert _zero(s2[0] - (-cc["K"] * (v1 - v2)) * v2)
    assert _zero(s2[1] + (-cc["K"] * (v1 - v2)) * v1)
    assert all(_zero(e) for e in ct.conditions["(S5-3)"])  # Chaplygin: Gamma(p_a) = lambda_a


def test_carriage_strong_consistency_at_special_l_and_sign_of_h(carriage_frame):
    """Seed 001: at XY = 1, phi = p + k with H = +(m R^2 + 2 J2)/(2R) is strongly consistent;
    the paper's H = -(...) (its bracket sign error) is not."""
    sys_, fd = carriage_frame
    cc = carriage_constants(sys_)
    l = cc["l"]  # noqa: E741
    th = sys_.q[4]
    v1, v2 = fd.v[:2]
    val = [s for s in _special_l(cc) if s.could_extract_minus_sign() is False][0]
    for H, expect in ((cc["H"], True), (-cc["H"], False)):
        Kh = cc["Khat"].subs(l, val)
        k3 = -Kh * sp.sin(th) * (v1 - v2) + H * sp.cos(th) * (v1 + v2)
        k4 = Kh * sp.cos(th) * (v1 - v2) + H * sp.sin(th) * (v1 + v2)
        phi = [fd.momenta[0] + k3, fd.momenta[1] + k4, fd.momenta[2]]
        phi = [sp.sympify(e).subs(l, val) for e in phi]
        ct = consistency_test(sys_, section=phi, fd=fd, subs={l: val})
        assert ct.holds is expect


# ------------------------------------------------------------------ seed 002: rolling disk
def _disk_seed002():
    """Vertical rolling disk in seed 002's notation, q = (x, y, phi, theta)."""
    x, y, phi, th = sp.symbols("x y phi theta", real=True)
    M, I, J, R = sp.symbols("M I J R", positive=True)  # noqa: E741
    frame = sp.Matrix([[0, R * sp.cos(phi)], [0, R * sp.sin(phi)], [1, 0], [0, 1]])
    sys_ = NonholonomicSystem(
        [x, y, phi, th], sp.diag(M, M, J, I), frame=frame, params=[M, I, J, R]
    )
    return sys_, sp.Matrix([[1, 0], [0, 1], [0, 0], [0, 0]])


def test_disk_is_a_restricted_euler_lagrange_system():
    """Seed 002 Prop. 2 and O7/O8/O10: Ltilde is the Fernandez-Bloch Lagrangian, regular."""
    sys_, F = _disk_seed002()
    M, I, J, R = sys_.params  # noqa: E741
    fd = frame_data(sys_, complement=F)
    assert list(fd.gamma) == [0, 0]
    phi_, th_ = fd.v[:2]
    ph = sys_.q[2]
    assert _zero(fd.multipliers[0] + M * R * sp.sin(ph) * phi_ * th_)
    assert _zero(fd.multipliers[1] - M * R * sp.cos(ph) * phi_ * th_)
    rt = restriction_test(sys_, fd=fd)
    assert rt.holds, rt.obstruction
    xd, yd, phd, thd = rt.data["velocities"]
    # Phi_a = p_a|_C extended constant along v^a (seed 002 allows any extension; the
    # Fernandez-Bloch choice Phi = M xdot of O7/O8 is another one)
    L = M * (xd**2 + yd**2) / 2 + I * thd**2 / 2 + J * phd**2 / 2
    vx, vy = xd - R * sp.cos(ph) * thd, yd - R * sp.sin(ph) * thd
    expected = L - M * R * thd * (sp.cos(ph) * vx + sp.sin(ph) * vy)
    assert _zero(rt.data["lagrangian"] - expected)
    assert _zero(rt.data["hessian_det"] - J * M**2 * (I + M * R**2))


def test_particle_is_not_consistent_with_momenta():
    """Seed 001 Sec. 7.1: the nonholonomic particle fails the test with phi = p."""
    from nhfast.systems import nonholonomic_particle

    sys_ = nonholonomic_particle(a=0)
    ct = consistency_test(sys_)
    assert not ct.holds and ct.obstruction


def test_restriction_fails_for_a_wrong_section():
    sys_, F = _disk_seed002()
    fd = frame_data(sys_, complement=F)
    rt = restriction_test(sys_, section=[0, 0], fd=fd)
    assert not rt.holds
    assert rt.conditions["EL(Ltilde) on NH"] and rt.obstruction


# ------------------------------------------------------------------ integrable / bad input
def test_integrable_constraints_are_flagged():
    sys_ = holonomic_particle()
    assert is_integrable(sys_)
    vt = vakonomic_test(sys_)
    assert vt.holds and vt.integrable and "integrable" in vt.statement
    assert vakonomic_is_nonholonomic(sys_, [sp.Symbol("mu")]).holds
    assert not is_integrable(unicycle())


def test_bad_input():
    sys_ = unicycle(as_chaplygin=False)
    with pytest.raises(TypeError, match="system must be a NonholonomicSystem"):
        vakonomic_test("unicycle")
    with pytest.raises(ValueError, match="subs: .* is not a parameter"):
        vakonomic_test(sys_, subs={sp.Symbol("zz"): 0})
    with pytest.raises(ValueError, match="mu must have k = 2 entries"):
        vakonomic_is_nonholonomic(sys_, [1, 2, 3])
    with pytest.raises(ValueError, match="section must have n - r = 2 entries"):
        consistency_test(sys_, section=[0])
    fd = frame_data(sys_)
    with pytest.raises(ValueError, match="section must be a function on C"):
        consistency_test(sys_, section=[fd.v[2], 0], fd=fd)
    with pytest.raises(ValueError, match="complement must be 4 x 2"):
        frame_data(sys_, complement=sp.eye(4))
    with pytest.raises(ValueError, match="does not complete"):
        frame_data(sys_, complement=sys_.frame)
    free = NonholonomicSystem(sys_.q, sys_.metric, params=sys_.params)
    with pytest.raises(ValueError, match="no constraints"):
        nonholonomic_data(free)


def test_symbolic_verdict_is_the_one_check_record() -> None:
    """Symbolic verdicts are Check records: reports render them like trajectory checks."""
    import json

    from nhfast.analysis import Check
    from nhfast.symbolic.vakonomic import SymbolicVerdict

    v = SymbolicVerdict(
        name="toy", holds=False, statement="fails", conditions={"c": [sp.Symbol("x")]},
        obstruction=[sp.Symbol("x")],
    )  # fmt: skip
    assert isinstance(v, Check) and not v
    d = json.loads(json.dumps(v.to_dict()))
    assert d["figures"] == {"conditions": 1, "obstruction": ["x"], "integrable": False}
