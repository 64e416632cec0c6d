"""Sub-expressions of the parameters alone, computed once per trajectory (derived parameters).

The library's plain ``nh_rhs`` is the reference: the integrator's ``nh_rhs_derived`` on the
derived rows must give the same trajectories, bit for bit, whatever the batch, block and
thread layout (a slot taking a new trajectory must recompute its rows).
"""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import nhfast as nh
from nhfast import _core
from nhfast._abi import METHODS
from nhfast.codegen.hoist import hoist_parameters

a, b, c = sp.symbols("a b c", positive=True)
x, y, u, v, t = sp.symbols("x y u v t")


def _back(exprs, derived):
    return [e.xreplace(dict(derived)) for e in exprs]


def test_hoist_lifts_parameter_subexpressions_and_keeps_values():
    exprs = [x / a + 2 * b * x**2, sp.sin(a * b) * y - x / a, sp.exp(c) + t * x * (a + b)]
    (new,), derived = hoist_parameters([exprs], [a, b, c])
    lifted = {e for _, e in derived}
    assert {1 / a, sp.sin(a * b), sp.exp(c), a + b} <= lifted
    for _s, e in derived:
        assert e.free_symbols <= {a, b, c}  # parameters alone
        assert not e.is_Atom
    # one symbol for 1/a, in both components
    (inv_a,) = [s for s, e in derived if e == 1 / a]
    assert inv_a in new[0].free_symbols and inv_a in new[1].free_symbols
    for old, got in zip(exprs, _back(new, derived), strict=True):
        assert sp.simplify(old - got) == 0
    for e in new:  # nothing of the parameters alone is left but atoms and derived symbols
        assert not any(
            isinstance(s, sp.Expr)
            and s.free_symbols
            and s.free_symbols <= {a, b, c}
            and not s.is_Atom
            and not (s.is_Mul and s.args[0] == -1)
            for s in sp.preorder_traversal(e)
        )


def test_hoist_leaves_atoms_negations_and_conditions():
    exprs = [a * x, -b * y, sp.Piecewise((x, a > 1), (y, True)), x + 3]
    (new,), derived = hoist_parameters([exprs], [a, b])
    assert derived == []
    assert new == exprs


expr_strategy = st.recursive(
    st.sampled_from([x, y, a, b, sp.Integer(2), sp.Rational(1, 3)]),
    lambda ch: st.one_of(
        st.tuples(ch, ch).map(lambda p: p[0] + p[1]),
        st.tuples(ch, ch).map(lambda p: p[0] * p[1]),
        st.tuples(ch, ch).map(lambda p: p[0] / (1 + p[1] ** 2)),
        ch.map(sp.sin),
        ch.map(lambda e: sp.sqrt(1 + e**2)),
    ),
    max_leaves=10,
)


@settings(max_examples=40, deadline=None)
@given(st.lists(expr_strategy, min_size=1, max_size=3))
def test_hoist_is_an_identity_in_value(exprs):
    (new,), derived = hoist_parameters([exprs], [a, b])
    vals = {x: 0.3, y: -1.1, a: 1.7, b: 0.6}
    for old, got in zip(exprs, _back(new, derived), strict=True):
        ref = complex(sp.N(old.subs(vals)))
        assert complex(sp.N(got.subs(vals))) == pytest.approx(ref, rel=1e-12, abs=1e-12)


def _pendulum_like() -> nh.VectorField:
    """Parameter-heavy rhs with a linear solve whose matrix depends on the parameters."""
    w = sp.Symbol("w")
    return nh.VectorField(
        [x, y],
        [y / a, -sp.sin(x) * (b + c) / sp.sqrt(a * b) + w * sp.cos(t) / (1 + a**2)],
        params=[a, b, c],
        time=t,
        solves=[nh.LinearSolve([w], sp.Matrix([[a + b**2]]), [x * c])],
        name="derived_test",
    )


def test_library_exports_derived_rows():
    cs = _pendulum_like().compile()
    assert cs.derived is not None
    rhs, derive, count = cs.derived
    assert count >= 4  # 1/a, (b + c)/sqrt(a b) or its factors, 1/(1 + a^2), a + b^2
    src = cs.source
    assert "nh_derive(" in src and "nh_rhs_derived(" in src
    cap, ctx, der, nd = cs.integrator_rhs()
    assert (cap, ctx, der, nd) == (rhs, None, derive, count)


def _integrate_both(cs, method, x0, par, tt, block, threads, h=0.0):
    out = []
    for use in (False, True):
        if use:
            cap, ctx, der, nd = cs.integrator_rhs()
        else:
            (cap, ctx), der, nd = cs.kernels["rhs"], None, 0
        ntraj = x0.shape[0]
        yy = np.empty((ntraj, tt.size, x0.shape[1]))
        status = np.zeros(ntraj, np.int32)
        stats = np.zeros((ntraj, _core.NSTATS), np.int64)
        _core.integrate_batch(
            cap, ctx, x0.shape[1], par.shape[1], 0, METHODS[method], tt, x0, par, yy, status,
            stats, 1e-10, 1e-10, h, 0.0, 10**6, 1e-12, 50, threads, block,
            derive=der, nderived=nd,
        )  # fmt: skip
        assert not status.any()
        out.append((yy, stats))
    return out


@pytest.mark.parametrize(
    ("method", "h"), [("dop853", 0.0), ("dopri5", 0.0), ("rk4", 0.01), ("gauss4", 0.05)]
)
def test_integrator_on_derived_rows_equals_plain_rhs(method, h):
    """Trajectories with their own parameters, more than a block: refilled slots recompute."""
    cs = _pendulum_like().compile()
    rng = np.random.default_rng(3)
    ntraj = 37
    x0 = rng.uniform(-1, 1, (ntraj, 2))
    par = rng.uniform(0.5, 2.0, (ntraj, 3))
    tt = np.linspace(0.0, 3.0, 4)
    (ya, sa), (yb, sb) = _integrate_both(cs, method, x0, par, tt, block=8, threads=2, h=h)
    np.testing.assert_array_equal(ya, yb)
    np.testing.assert_array_equal(sa, sb)
    # and one trajectory alone, in a block of its own, gives the same
    (y1, _), (y2, _) = _integrate_both(cs, method, x0[5:6], par[5:6], tt, 1, 1, h=h)
    np.testing.assert_array_equal(y2[0], yb[5])
    np.testing.assert_array_equal(y1[0], y2[0])


def test_integrate_uses_derived_rows_and_matches_scipy():
    from scipy.integrate import solve_ivp

    vf = _pendulum_like()
    par = np.array([1.3, 0.7, 2.1])
    res = nh.integrate(vf, [0.4, -0.2], np.linspace(0, 5, 6), params=par, rtol=1e-12, atol=1e-12)
    A, B, C = par

    def f(tt, s):
        w = s[0] * C / (A + B**2)
        return [s[1] / A, -np.sin(s[0]) * (B + C) / np.sqrt(A * B) + w * np.cos(tt) / (1 + A**2)]

    ref = solve_ivp(f, (0, 5), [0.4, -0.2], method="DOP853", rtol=1e-13, atol=1e-13,
                    t_eval=np.linspace(0, 5, 6))  # fmt: skip
    np.testing.assert_allclose(res.y[0], ref.y.T, rtol=1e-9, atol=1e-10)


def test_derive_arguments_are_checked():
    cs = _pendulum_like().compile()
    cap, ctx, der, nd = cs.integrator_rhs()
    x0 = np.zeros((1, 2))
    par = np.ones((1, 3))
    tt = np.array([0.0, 1.0])

    def call(**kw):
        _core.integrate_batch(
            cap, ctx, 2, 3, 0, METHODS["rk4"], tt, x0, par, np.empty((1, 2, 2)),
            np.zeros(1, np.int32), np.zeros((1, _core.NSTATS), np.int64), 1e-8, 1e-8, 0.1, 0.0,
            100, 1e-12, 5, **kw,
        )  # fmt: skip

    with pytest.raises(ValueError, match="derive and nderived"):
        call(derive=der, nderived=0)
    with pytest.raises(ValueError, match="derive and nderived"):
        call(nderived=2)
    with pytest.raises(ValueError, match="nderived"):
        call(derive=der, nderived=-1)
    call(derive=der, nderived=nd)


def test_plain_rhs_keeps_its_contract():
    """``nh_rhs`` (evaluate) derives internally: equal to SymPy at random points."""
    vf = _pendulum_like()
    rng = np.random.default_rng(7)
    xs = rng.uniform(-1, 1, (5, 2))
    par = rng.uniform(0.5, 2.0, (5, 3))
    got = vf.evaluate("rhs", xs, t=0.3, params=par)
    for i in range(5):
        A, B, C = par[i]
        w = xs[i, 0] * C / (A + B**2)
        f1 = -np.sin(xs[i, 0]) * (B + C) / np.sqrt(A * B) + w * np.cos(0.3) / (1 + A**2)
        ref = [xs[i, 1] / A, f1]
        np.testing.assert_allclose(got[i], ref, rtol=1e-13, atol=1e-15)


def test_no_parameters_no_derived_rows():
    vf = nh.VectorField([x, y], [y, -sp.sin(x)], name="plain_pendulum")
    cs = vf.compile()
    assert cs.derived is None
    assert cs.integrator_rhs()[2:] == (None, 0)
