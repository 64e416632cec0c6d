"""Generated kernels against independent evaluations (SymPy, NumPy, finite differences)."""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import nhfast as nh
from nhfast.codegen import generate_c

X = sp.symbols("x0:3")
P = sp.symbols("a b")

_leaves = st.sampled_from([*X, *P, sp.Integer(2), sp.Rational(1, 3), sp.Float(0.75), sp.pi])


def _combine(children):
    unary = st.tuples(
        st.sampled_from(
            [
                sp.sin,
                sp.cos,
                sp.exp,
                sp.atan,
                lambda e: e**2,
                lambda e: e**3,
                lambda e: 1 / (1 + e**2),
                lambda e: sp.sqrt(1 + e**2),
                lambda e: (2 + e**2) ** sp.Rational(-1, 2),
            ]
        ),
        children,
    )
    binary = st.tuples(st.sampled_from([sp.Add, sp.Mul, lambda u, v: u - v]), children, children)
    return st.one_of(unary.map(lambda t: t[0](t[1])), binary.map(lambda t: t[0](t[1], t[2])))


expressions = st.recursive(_leaves, _combine, max_leaves=12)


@settings(max_examples=25, deadline=None)
@given(st.lists(expressions, min_size=3, max_size=3), st.integers(0, 2**31 - 1))
def test_random_expressions_match_sympy(exprs, seed):
    """C kernels (powers expanded, joint CSE) agree with SymPy's own numeric evaluation."""
    vf = nh.VectorField(list(X), exprs, params=list(P))
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1.5, 1.5, size=(9, 3))
    par = rng.uniform(0.5, 2.0, size=(9, 2))
    got = vf.evaluate("rhs", x, params=par)
    f = sp.lambdify([*X, *P], exprs, modules="mpmath")
    for i in range(9):
        ref = np.array([float(v) for v in f(*x[i], *par[i])], dtype=float)
        assert np.allclose(got[i], ref, rtol=1e-12, atol=1e-12), (exprs, got[i], ref)


def test_argument_order_comes_from_user_lists():
    """States and params in a non-alphabetical order: the kernel must follow the lists."""
    z, a, m = sp.symbols("z a m")
    k, c = sp.symbols("k c")
    vf = nh.VectorField([z, a, m], [10 * z + a, 100 * a + 2 * m, k - c], params=[k, c])
    out = vf.evaluate("rhs", [1.0, 2.0, 3.0], params=[5.0, 7.0])
    assert np.array_equal(out, [12.0, 206.0, -2.0])
    src = generate_c(vf.kernel_set())
    assert "nh_x0 = x[0 * ld + l]" in src and "nh_p1 = par[1 * ld + l]" in src


def test_jacobian_and_divergence_match_finite_differences(sleigh):
    rng = np.random.default_rng(5)
    x = rng.normal(size=(4, 5))
    par = np.array([0.4, 1.3, 0.8])
    cs = sleigh.compile(("jacobian", "divergence"))
    J = cs.evaluate("jacobian", x, params=par)
    div = cs.evaluate("divergence", x, params=par)[:, 0]
    eps = 1e-6
    for j in range(5):
        d = np.zeros(5)
        d[j] = eps
        fd = (cs.evaluate("rhs", x + d, params=par) - cs.evaluate("rhs", x - d, params=par)) / (
            2 * eps
        )
        assert np.allclose(J[:, :, j], fd, atol=1e-8)
    assert np.allclose(div, np.trace(J, axis1=1, axis2=2), atol=1e-13)
    # sleigh: div X = -m a v / (J + m a^2) (not divergence free: no Liouville measure)
    a, m, Jc = par
    assert np.allclose(div, -m * a * x[:, 3] / (Jc + m * a**2), atol=1e-13)


def test_hamiltonian_companions(kepler):
    cs = kepler.compile(("dHdq", "dHdp", "observables"))
    x = np.array([[0.6, 0.8, 0.1, -0.3]])
    r = np.hypot(0.6, 0.8)
    assert np.allclose(cs.evaluate("dHdq", x), [[0.6 / r**3, 0.8 / r**3]], atol=1e-15)
    assert np.allclose(cs.evaluate("dHdp", x), [[0.1, -0.3]], atol=1e-15)
    assert np.allclose(cs.evaluate("observables", x), [[0.05 - 1 / r]], atol=1e-15)
    with pytest.raises(ValueError, match="exists only for a HamiltonianSystem"):
        nh.VectorField(kepler.states, kepler.rhs).kernel_set(["dHdq"])


def test_time_dependent_kernel(nonautonomous):
    out = nonautonomous.evaluate("rhs", [[2.0], [2.0]], t=np.array([0.0, np.pi]))
    assert np.allclose(out[:, 0], [2.0, -2.0])


def test_compile_reports_timings_and_cache(sleigh):
    cs = sleigh.compile(("observables",))
    assert cs.backend == "c" and cs.key and {"generate", "compile"} <= set(cs.timings)
    assert sleigh.compile(("observables",)) is cs
