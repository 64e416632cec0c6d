"""Frames and charts carry their singular sets: ``integrate`` stops there (issue 32, item 1).

Reference system: the knife edge (a skate) on the plane, ``q = (x, y, theta)``, metric
``diag(m, m, J)``, constraint ``-sin(theta) dx + cos(theta) dy = 0``.  Its motions are known in
closed form: ``theta = theta0 + w t`` and the speed ``u`` along the blade is constant, so
``x = x0 + (u / w) (sin theta - sin theta0)``, ``y = y0 - (u / w) (cos theta - cos theta0)``.
The default coordinate frame (``y`` dependent, quasi-velocity ``xdot``) is singular at
``cos(theta) = 0``; a trajectory with ``w != 0`` crosses it.
"""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp

import nhfast as nh
from nhfast import _abi
from nhfast.errors import IntegrationError
from nhfast.symbolic.equations import (
    almost_poisson_equations,
    chaplygin_equations,
    hamel_equations,
)
from nhfast.symbolic.lie_chaplygin import lie_chaplygin_system
from nhfast.symbolic.systems import NonholonomicSystem
from nhfast.systems import chaplygin_sleigh
from nhfast.systems.veselova_body.chart import reduced_system as veselova_chart
from nhfast.systems.veselova_body.lie import lie_algebra_system

LEFT = _abi.LANE["left_domain"]
WATCHED = [("taylor", {}), ("dop853", {"dense": True})]
x, y, th = sp.symbols("x y theta", real=True)
m, J = sp.symbols("m J", positive=True)
Q = [x, y, th]
G = sp.diag(m, m, J)
W = sp.Matrix([[-sp.sin(th), sp.cos(th), 0]])
PAR = [1.3, 0.7]  # m, J


def knife(**kw) -> NonholonomicSystem:
    return NonholonomicSystem(Q, G, constraints=W, params=[m, J], **kw)


def closed_form(t: np.ndarray, th0: float, u: float, w: float) -> np.ndarray:
    """``(x, y, theta)`` at the times ``t`` from ``(0, 0, th0)``, speed ``u``, spin ``w``."""
    ang = th0 + w * t
    return np.column_stack(
        [u / w * (np.sin(ang) - np.sin(th0)), -u / w * (np.cos(ang) - np.cos(th0)), ang]
    )


@pytest.fixture(scope="module")
def default_hamel():
    return hamel_equations(knife()).as_vector_field()


@pytest.mark.parametrize(("method", "kw"), WATCHED)
def test_default_chart_stops_where_its_frame_is_singular(default_hamel, method, kw):
    """Quasi-velocity xdot = u cos(theta): theta = 0 -> 3 crosses cos(theta) = 0 at
    t = pi / 2; the trajectory stops there, naming the determinant, and is right before."""
    u, w = 1.0, 1.0
    t = np.linspace(0.0, 3.0, 7)
    with pytest.raises(IntegrationError) as err:
        nh.integrate(default_hamel, [0, 0, 0, u, w], t, params=PAR, method=method, rtol=1e-12, **kw)
    msg = str(err.value)
    assert "left its domain" in msg and "det W_dep = cos(theta) != 0" in msg
    res = err.value.result
    assert res.status[0] == LEFT
    assert abs(res.t_reached[0] - np.pi / 2) < 1e-9
    inside = t < np.pi / 2
    np.testing.assert_allclose(
        res.y[0, inside, :3], closed_form(t[inside], 0.0, u, w), rtol=0, atol=1e-9
    )
    assert np.all(np.isnan(res.y[0, ~inside]))


@pytest.mark.parametrize(("method", "kw"), WATCHED)
def test_default_chart_stops_from_the_negative_side(default_hamel, method, kw):
    """Start at theta = 2.5 (cos < 0) turning back: the crossing at t = 2.5 - pi / 2 stops it."""
    th0, u, w = 2.5, 1.0, -1.0
    x0 = [0, 0, th0, u * np.cos(th0), w]
    with pytest.raises(IntegrationError, match=r"cos\(theta\) != 0 \(< 0 side\)") as err:
        nh.integrate(default_hamel, x0, [0.0, 2.0], params=PAR, method=method, rtol=1e-12, **kw)
    assert err.value.result.status[0] == LEFT
    assert abs(err.value.result.t_reached[0] - (th0 - np.pi / 2)) < 1e-9


def test_default_chart_unwatched_steps_stop_at_an_output(default_hamel):
    """Without dense output the output rows are checked: the first row past pi / 2 ends it."""
    t = np.linspace(0.0, 3.0, 13)
    with pytest.raises(IntegrationError, match="left its domain between output times") as err:
        nh.integrate(default_hamel, [0, 0, 0, 1.0, 1.0], t, params=PAR, rtol=1e-12)
    res = err.value.result
    assert res.status[0] == LEFT
    assert res.t_reached[0] == t[t < np.pi / 2][-1]


def test_almost_poisson_default_chart_stops_too():
    """The almost-Poisson form in the same frame: p_1 = m xdot / cos^2 blows up there."""
    vf = almost_poisson_equations(knife()).as_vector_field()
    p1 = PAR[0] * 1.0  # p_1 = K_11 xdot = m / cos^2(0) * 1
    with pytest.raises(IntegrationError, match=r"det W_dep = cos\(theta\) != 0") as err:
        nh.integrate(vf, [0, 0, 0, p1, PAR[1]], [0.0, 3.0], params=PAR, rtol=1e-12)
    res = err.value.result
    assert res.status[0] == LEFT
    assert abs(res.t_reached[0] - np.pi / 2) < 1e-5


def test_states_on_the_singular_set_or_on_both_sides_are_refused(default_hamel):
    """(cos(pi / 2) is 6e-17 in floating point: the exact locus is theta = 0 of dependent=[x].)"""
    vf = hamel_equations(knife(dependent=[x])).as_vector_field()
    with pytest.raises(ValueError, match=r"-sin\(theta\) != 0.*fails at row 0"):
        nh.integrate(vf, [0, 0, 0.0, 0.0, 1.0], [0.0, 1.0], params=PAR)
    both = np.array([[0, 0, 0.1, 1.0, 1.0], [0, 0, 3.0, -1.0, 1.0]])
    with pytest.raises(ValueError, match="both sides of the singular set"):
        default_hamel.oriented(both, np.array([PAR]))


@pytest.mark.parametrize(("method", "kw"), WATCHED)
def test_a_batch_on_both_sides_runs_each_side(default_hamel, method, kw):
    """Rows with cos(theta0) > 0, < 0, > 0 run as three batches in their own orientation:
    the first two stay on their side until t = 1.2 and match the closed form; the third
    crosses pi / 2 at t = pi / 2 - 1 and stops there."""
    u, w, t_end = 1.0, 1.0, 1.2
    th0 = np.array([0.1, 3.0, 1.0])
    x0 = np.column_stack([np.zeros((3, 2)), th0, u * np.cos(th0), np.full(3, w)])
    t = np.linspace(0.0, t_end, 5)
    with pytest.raises(IntegrationError, match="ran as separate batches"):
        nh.integrate(default_hamel, x0, t, params=PAR, method=method, rtol=1e-12, **kw)
    with pytest.warns(nh.IntegrationWarning, match=r"cos\(theta\) != 0 \(> 0 side\)"):
        res = nh.integrate(
            default_hamel, x0, t, params=PAR, method=method, rtol=1e-12, keep_failed=True, **kw
        )
    assert res.status.tolist() == [0, 0, LEFT]
    for i in (0, 1):
        np.testing.assert_allclose(res.y[i, :, :3], closed_form(t, th0[i], u, w), rtol=0, atol=1e-9)
    assert abs(res.t_reached[2] - (np.pi / 2 - 1.0)) < 1e-9


@pytest.mark.parametrize("form", ["hamel", "ap"])
def test_regular_frame_matches_the_closed_form_across(form):
    """frame="regular": (cos theta, sin theta, 0) and d/dtheta, no singular set; through
    theta = pi / 2 and 3 pi / 2 the state matches the closed form."""
    system = knife(frame="regular")
    assert system.frame_domain == {}
    assert sp.simplify(system.frame[:, 0] - sp.Matrix([sp.cos(th), sp.sin(th), 0])) == sp.zeros(
        3, 1
    )
    build = hamel_equations if form == "hamel" else almost_poisson_equations
    vf = build(system).as_vector_field()
    assert not vf.domain
    u, w = 0.8, 1.1
    mom = [u, w] if form == "hamel" else [PAR[0] * u, PAR[1] * w]
    t = np.linspace(0.0, 7.0, 15)
    res = nh.integrate(vf, [0, 0, 0, *mom], t, params=PAR, rtol=1e-13, atol=1e-13)
    assert res.success
    np.testing.assert_allclose(res.y[0, :, :3], closed_form(t, 0.0, u, w), rtol=0, atol=1e-9)


def test_user_dependent_coordinates_match_the_closed_form():
    """dependent=[x]: quasi-velocity ydot = u sin(theta), singular at sin(theta) = 0, which
    theta = 0.3 -> 2.8 does not reach."""
    system = knife(dependent=[x])
    assert system.dependent == [x]
    (label,) = system.frame_domain
    assert "sin(theta)" in label and "x dependent" in label
    vf = hamel_equations(system).as_vector_field()
    th0, u, w = 0.3, 1.2, 1.0
    t = np.linspace(0.0, 2.5, 11)
    x0 = [0, 0, th0, u * np.sin(th0), w]
    res = nh.integrate(vf, x0, t, params=PAR, method="taylor", rtol=1e-13, atol=1e-13)
    assert res.success
    np.testing.assert_allclose(res.y[0, :, :3], closed_form(t, th0, u, w), rtol=0, atol=1e-9)
    np.testing.assert_allclose(res.y[0, :, 3], u * np.sin(th0 + w * t), rtol=0, atol=1e-9)


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"frame": "polar"}, r"one of 'coordinates', 'regular', got 'polar'"),
        ({"dependent": [sp.Symbol("z")]}, "dependent contains z, which is not in q"),
        ({"dependent": [x, y]}, "dependent must be 1 distinct coordinate"),
        ({"dependent": [th]}, "block of constraints in the columns of theta is singular"),
        ({"frame": "regular", "dependent": [x]}, "dependent names the dependent coordinates"),
    ],
)
def test_bad_frame_choices_are_named(kw, match):
    with pytest.raises(ValueError, match=match):
        knife(**kw)


def test_regular_frame_needs_one_row_of_two_entries():
    w2 = sp.Matrix([[-sp.sin(th), sp.cos(th), 1]])
    with pytest.raises(ValueError, match="two entries that are not identically zero, got 3"):
        NonholonomicSystem(Q, G, constraints=w2, params=[m, J], frame="regular")
    q4 = [*Q, sp.Symbol("z", real=True)]
    w4 = sp.Matrix([[-sp.sin(th), sp.cos(th), 0, 0], [0, 0, 1, 1]])
    with pytest.raises(ValueError, match="one constraint row, got 2"):
        NonholonomicSystem(q4, sp.eye(4), constraints=w4, frame="regular")
    with pytest.raises(ValueError, match="builds a frame of ker"):
        NonholonomicSystem(Q, G, params=[m, J], frame="regular")


def test_regular_frame_with_a_varying_norm_declares_it():
    """a dx + b dy = 0 with a^2 + b^2 = 1 + x^2 (never 0): the condition is declared > 0."""
    w = sp.Matrix([[x, 1, 0]])
    system = NonholonomicSystem(Q, G, constraints=w, params=[m, J], frame="regular")
    ((label, cond),) = system.frame_domain.items()
    assert sp.expand(cond - (1 + x**2)) == 0 and "> 0" in label
    assert sp.simplify(w * system.frame) == sp.zeros(1, 2)


def test_removable_zero_over_zero_is_cancelled():
    """Without simplification the completed frame's pivot tan(theta) leaves terms
    ``(...)/tan(theta)`` that cancel analytically: the generated right-hand side must be
    finite at theta = 0 and agree with the simplified one."""
    raw = hamel_equations(knife(simplify=False)).as_vector_field()
    ref = hamel_equations(knife()).as_vector_field()
    rng = np.random.default_rng(3)
    angles = [0.0, 1e-9, 0.7, -1.2]
    pts = np.column_stack([rng.normal(size=(4, 2)), angles, rng.normal(size=(4, 2))])
    for p in pts:
        a = raw.evaluate("rhs", p, params=PAR)
        b = ref.evaluate("rhs", p, params=PAR)
        assert np.all(np.isfinite(a))
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def test_chaplygin_reduced_sleigh_stops_at_the_splitting_locus():
    """The sleigh with G = x-translations: the reduced equations are singular at
    sin(theta) = 0; a trajectory turning through theta = 0 stops there."""
    vf = chaplygin_equations(chaplygin_sleigh().reduce()).as_vector_field()
    assert vf.nonzero
    assert vf.states[1] == sp.Symbol("theta", real=True) or str(vf.states[1]) == "theta"
    with pytest.raises(IntegrationError, match=r"det W_g = -sin\(theta\) != 0") as err:
        nh.integrate(vf, [0.0, 0.5, 0.0, -1.0], [0.0, 5.0], params=[1.0, 1.0, 1.0], method="taylor")
    assert err.value.result.status[0] == LEFT


@pytest.fixture(scope="module")
def hemisphere_fields():
    lie = chaplygin_equations(lie_algebra_system(3)).as_vector_field()
    chart = chaplygin_equations(veselova_chart(3)).as_vector_field()
    return {"lie": lie, "chart": chart}


@pytest.mark.parametrize("route", ["lie", "chart"])
@pytest.mark.parametrize(("method", "kw"), [*WATCHED, ("dop853", {})])
def test_hemisphere_chart_stops_at_the_equator(hemisphere_fields, route, method, kw):
    """Veselova's body: gamma_n = sqrt(1 - |s|^2) -> 0 at the equator; the chart's field stops
    there with "left its domain" (not "step size underflow"), and just before it the state is
    inside the chart, close to the equator."""
    vf = hemisphere_fields[route]
    x0 = [0.9, 0.0, 1.0, 0.0]
    par = [1.0, 2.0, 3.0]
    with pytest.raises(IntegrationError) as err:
        nh.integrate(vf, x0, [0.0, 5.0], params=par, method=method, rtol=1e-10, **kw)
    msg = str(err.value)
    assert "hemisphere chart: gamma_n > 0" in msg and "step size underflow" not in msg[:80]
    res = err.value.result
    assert res.status[0] == LEFT
    t_exit = res.t_reached[0]
    before = nh.integrate(vf, x0, [0.0, t_exit * (1 - 1e-4)], params=par, rtol=1e-10)
    s = before.y[0, -1, :2]
    assert 0 < 1 - s @ s < 1e-2


def test_lie_chaplygin_system_declares_its_radical_chart():
    """Lifts holding sqrt(1 - s1^2 - s2^2): the reduced data carry ``P > 0`` as domain."""
    red = lie_algebra_system(3, compute_C=False)
    s1, s2 = red.s
    lifts = red.extra["lifts"]
    metric_of = lambda a, b: (a.T * b).trace()  # noqa: E731 - the Frobenius metric
    own = lie_chaplygin_system(red.s, lifts, metric_of, compute_C=False)
    ((label, cond),) = own.extra["domain"].items()
    assert sp.expand(cond - (1 - s1**2 - s2**2)) == 0 and "> 0" in label


def test_vector_field_nonzero_conditions_are_checked():
    a = sp.Symbol("a", real=True)
    vf = nh.VectorField([a], [1], domain={"a != 0": sp.Ne(a, 0)})
    assert vf.nonzero == ("a != 0",) and vf.domain == {"a != 0": a}
    assert vf.oriented(np.array([[-1.0]]), np.zeros((1, 0))).domain == {"a != 0 (< 0 side)": -a}
    with pytest.raises(ValueError, match="nonzero names 'b', not a label of domain"):
        nh.VectorField([a], [1], domain={"a": a}, nonzero=["b"])
    with pytest.raises(TypeError, match="nonzero must be a sequence of domain labels"):
        nh.VectorField([a], [1], domain={"a": a}, nonzero="a")
    # x' = 1 from -1: a = 0 at t = 1, crossed upwards (a > 0 alone would refuse the start)
    with pytest.raises(IntegrationError, match="reached 0 at t = 1") as err:
        nh.integrate(vf, [-1.0], [0.0, 2.0], method="taylor")
    assert abs(err.value.result.t_reached[0] - 1.0) < 1e-12


def test_sampling_keeps_both_sides_of_a_singular_set(default_hamel):
    """A box across cos(theta) = 0: samples on both sides (a condition != 0, not > 0)."""
    from nhfast.analysis.sampling import sample_box

    lo, hi = [-1, -1, 1.0, -1, -1], [1, 1, 2.2, 1, 1]
    xs = sample_box(default_hamel, 400, lo, hi, seed=2, params=PAR)
    c = np.cos(xs[:, 2])
    assert xs.shape == (400, 5) and np.any(c > 0) and np.any(c < 0)


def test_large_block_declares_the_denominators_of_the_frame():
    """k = 4 > 3 constraints: the determinant is not formed, the denominators of the frame
    (here 1 / cos(theta) from cos(theta) dx1 = dtheta) are declared != 0 instead."""
    xs = sp.symbols("x1:5", real=True)
    q = [th, *xs]
    w = sp.zeros(4, 5)
    w[0, 0], w[0, 1] = -1, sp.cos(th)
    for i in range(1, 4):
        w[i, i + 1] = 1
    system = NonholonomicSystem(q, sp.eye(5), constraints=w)
    assert system.dependent == list(xs)
    ((label, cond),) = system.frame_domain.items()
    assert "denominators cos(theta) != 0" in label and cond == sp.Ne(sp.cos(th), 0)
    vf = hamel_equations(system).as_vector_field()
    assert vf.nonzero == (label,) and vf.domain[label] == sp.cos(th)


def test_hamiltonised_run_stops_at_the_equator():
    """The measure-preserving route (tau-flow in chunks) watches the chart too: from the
    same state as above the Veselova body reaches the equator, named, not a blow-up; the
    lane that stays inside is unchanged by the watch (agrees with DOP853)."""
    from nhfast import integrate_hamiltonised
    from nhfast.systems import veselova

    par = [1.0, 2.0, 3.0]
    x0 = np.array([[0.9, 0.0, 1.0, 0.0], [0.1, 0.2, 0.3, -0.2]])
    with pytest.raises(IntegrationError, match="hemisphere chart: gamma_n > 0") as err:
        integrate_hamiltonised(veselova(3), x0, [0.0, 2.0, 5.0], h=0.01, params=par)
    assert err.value.result.status.tolist() == [LEFT, 0]
    ref = nh.integrate(
        chaplygin_equations(veselova(3)).as_vector_field(), x0[1], [0.0, 2.0, 5.0], params=par,
        rtol=1e-13, atol=1e-13,
    )  # fmt: skip
    np.testing.assert_allclose(err.value.result.y[1], ref.y[0], rtol=0, atol=1e-8)
