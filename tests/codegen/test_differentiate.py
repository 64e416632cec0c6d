"""Generated derivatives of indexed programs: divergence and Jacobian-vector products.

``with_divergence`` is checked against the hand-derived divergence of the Veselova program
(seed 000, its docstring formula), against the exact SymPy trace of the unrolled program and
against central finite differences of the right-hand side (random programs, hypothesis);
``jvp_program`` against the SymPy Jacobian times ``dx`` (exactly, at rational points) and
against finite differences.  The generated divergence has as many statements at ``n = 40``
as at ``n = 8`` (``O(n)`` work per lane).
"""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nhfast.codegen import IndexedProgram, StructuredNumpyKernel, structured_numpy_kernels
from nhfast.codegen.differentiate import divergence_block, jvp_program, with_divergence
from nhfast.structured_field import StructuredVectorField
from nhfast.systems import veselova


def cubic(g: list) -> sp.Expr:
    return g[0] * g[1] + g[-1] ** 3


def _evaluate(prog: IndexedProgram, family: str, x: np.ndarray, par: np.ndarray, t=None):
    """NumPy backend: ``x`` (lanes, n_state), ``par`` (lanes, n_params) -> (lanes, n_out)."""
    lanes = x.shape[0]
    tt = np.zeros(lanes) if t is None else t
    kern = StructuredNumpyKernel(prog, family)
    return kern.evaluate(tt, x.T.copy(), par.T.copy()).T


def _veselova_points(n: int, lanes: int, seed: int, on_manifold: bool):
    rng = np.random.default_rng(seed)
    g = rng.normal(size=(lanes, n))
    m = rng.normal(size=(lanes, n))
    if on_manifold:  # |gamma| = 1, gamma . m = 0
        g /= np.linalg.norm(g, axis=1, keepdims=True)
        m -= np.sum(m * g, axis=1, keepdims=True) * g
    a = rng.uniform(0.5, 3.0, size=(lanes, n))
    return np.concatenate([g, m], axis=1), a


def _fd_diagonal(prog: IndexedProgram, x: np.ndarray, par: np.ndarray, h: float, t=None):
    """Central finite differences of the diagonal of d rhs / dx: shape (lanes, n_state)."""
    lanes, dim = x.shape
    xs = np.concatenate([x + h * e for e in np.eye(dim)] + [x - h * e for e in np.eye(dim)])
    ps = np.concatenate([par] * (2 * dim))
    ts = None if t is None else np.concatenate([t] * (2 * dim))
    f = _evaluate(prog, "rhs", xs, ps, ts).reshape(2, dim, lanes, dim)
    return np.stack([(f[0, j, :, j] - f[1, j, :, j]) / (2 * h) for j in range(dim)], axis=1)


def _fd_trace(prog: IndexedProgram, x: np.ndarray, par: np.ndarray, h: float, t=None):
    """Central finite-difference trace of d rhs / dx at every lane."""
    return np.sum(_fd_diagonal(prog, x, par, h, t), axis=1)


# ------------------------------------------------------------------ Veselova (seed 000) ----


def hand_veselova(n: int, potential=None) -> IndexedProgram:
    """The whole-sphere Veselova field written by hand, with its hand-derived divergence.

    As ``nhfast.systems.veselova_body.veselova_program`` writes it (``gammadot = v =
    P_gamma A^-1 m / c``, ``mdot = -(m . v) gamma - P_gamma grad U``, ``c = (A gamma,
    gamma)``), copied here so that the reference stays independent of how the package builds
    its programs: the ``divergence`` ``-(n-2) gw/(r2 c) - 2 gm/c^2 + gm sia/(r2^2 c)`` was
    derived on paper.
    """
    prog = IndexedProgram(n)
    gam = list(sp.symbols(f"gamma1:{n + 1}", real=True))
    g = prog.state_vector("gamma", gam)
    m = prog.state_vector("m")
    a = prog.param_vector("a", positive=True)
    U = sp.sympify(potential(gam)) if potential is not None else sp.Integer(0)
    dU = prog.unrolled("dU", [sp.diff(U, gk) for gk in gam]) if U != 0 else sp.Integer(0)
    c = prog.reduce("c", a * g**2)
    r2 = prog.reduce("r2", g**2)
    gw = prog.reduce("gw", g * m / a)
    gm = prog.reduce("gm", g * m)
    mw = prog.reduce("mw", m**2 / a)
    sia = prog.reduce("sia", g**2 / a)
    gdU = prog.reduce("gdU", g * dU) if U != 0 else sp.Integer(0)
    mv = prog.scalar("mv", (mw - gw * gm / r2) / c)
    ic = prog.scalar("ic", 1 / c)
    kv = prog.scalar("kv", gw / (r2 * c))
    km = prog.scalar("km", (mv - gdU) / r2)
    prog.output("rhs", [m / a * ic - kv * g, -km * g - dU])
    prog.output("observables", [mw / (2 * c), r2], names=["kinetic", "gamma_norm"])
    prog.output("divergence", [-(n - 2) * gw / (r2 * c) - 2 * gm / c**2 + gm * sia / (r2**2 * c)])
    return prog


@pytest.mark.parametrize("n", [3, 5, 8])
@pytest.mark.parametrize("potential", [None, cubic])
def test_veselova_divergence_matches_hand_derived(n, potential):
    """Generated trace = ``-(n-2) gw/(r2 c) - 2 gm/c^2 + gm sia/(r2^2 c)`` (hand-derived),
    off and on the constraint manifold ``|gamma| = 1``, ``gamma . m = 0``."""
    prog = hand_veselova(n, potential)
    gen = with_divergence(prog)
    for on_manifold in (False, True):
        x, a = _veselova_points(n, 40, seed=n, on_manifold=on_manifold)
        want = _evaluate(prog, "divergence", x, a)[:, 0]
        got = _evaluate(gen, "divergence", x, a)[:, 0]
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14 * np.max(np.abs(want)))
    # the hand-typed output was replaced, not kept; the other outputs are unchanged
    assert gen.outputs["divergence"] != prog.outputs["divergence"]
    assert gen.outputs["rhs"] == prog.outputs["rhs"]
    assert gen.outputs["observables"] == prog.outputs["observables"]


def test_veselova_divergence_through_c_looped():
    """The generated statements compile (looped kernels, n > UNROLL_MAX_N) and agree."""
    n = 20
    prog = hand_veselova(n, cubic)
    x, a = _veselova_points(n, 9, seed=3, on_manifold=False)
    got = StructuredVectorField(with_divergence(prog), name="gen_div").evaluate(
        "divergence", x, params=a
    )[:, 0]
    want = _evaluate(prog, "divergence", x, a)[:, 0]
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14 * np.max(np.abs(want)))


def shipped_veselova(n: int, potential=None) -> IndexedProgram:
    """The program behind ``veselova(n, form="structured")`` (however the package derives it)."""
    return veselova(n, potential, form="structured").program


def test_shipped_veselova_divergence_finite_differences_and_seed_formula():
    """The shipped structured Veselova program: the generated trace matches finite
    differences, and on the constraint manifold the hand-derived formula."""
    n = 5
    prog = shipped_veselova(n, cubic)
    gen = with_divergence(prog)
    x, a = _veselova_points(n, 6, seed=11, on_manifold=False)
    got = _evaluate(gen, "divergence", x, a)[:, 0]
    fd = _fd_trace(prog, x, a, h=1e-6)
    np.testing.assert_allclose(got, fd, rtol=1e-6, atol=1e-6 * np.max(np.abs(fd)))
    x, a = _veselova_points(n, 6, seed=12, on_manifold=True)
    got = _evaluate(gen, "divergence", x, a)[:, 0]
    want = _evaluate(hand_veselova(n), "divergence", x, a)[:, 0]
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12 * np.max(np.abs(want)))


def test_divergence_statement_count_does_not_grow_with_n():
    """O(n) per lane: the same statements at n = 8 and n = 40 (loops of length n), for the
    hand-written and the shipped Veselova programs."""
    cases = [(hand_veselova, None), (hand_veselova, cubic), (shipped_veselova, None)]
    for build, potential in cases:
        progs = {n: build(n, potential) for n in (8, 40)}
        gens = {n: with_divergence(p) for n, p in progs.items()}
        assert len(gens[8].statements) == len(gens[40].statements)
        added = gens[40].statements[len(progs[40].statements) :]
        assert added and not gens[40].is_indexed(gens[40].outputs["divergence"][0])
        if build is hand_veselova:  # no unrolled statement: every loop is over the index
            assert {s.kind for s in added} <= {"scalar", "reduce", "vector"}
    # forward mode: at most one tangent statement per statement, whatever n
    counts = {n: len(jvp_program(hand_veselova(n, cubic)).statements) for n in (8, 40)}
    assert counts[8] == counts[40] <= 2 * len(hand_veselova(8, cubic).statements)


def test_jvp_of_veselova_is_jacobian_times_dx_exactly():
    """n = 3 with a potential: tangent rows = (SymPy Jacobian of rhs) dx at rational points."""
    n = 3
    prog = hand_veselova(n, cubic)
    jp = jvp_program(prog)
    X = prog.state_symbols
    dX = jp.state_symbols[len(X) :]
    assert jp.n_state == 2 * prog.n_state and jp.param_symbols == prog.param_symbols
    assert [str(s) for s in dX] == [f"d_gamma{k}" for k in (1, 2, 3)] + [
        f"d_m{k}" for k in (1, 2, 3)
    ]
    rhs = prog.to_sympy("rhs")
    got = jp.to_sympy("rhs")
    rng = np.random.default_rng(5)
    vals = {s: sp.Rational(int(rng.integers(-9, 10)), 7) for s in X + dX}
    vals.update({s: sp.Rational(int(rng.integers(5, 30)), 9) for s in prog.param_symbols})
    J = sp.Matrix(rhs).jacobian(X).xreplace(vals)
    want = J * sp.Matrix([vals[s] for s in dX])
    assert [e.xreplace(vals) for e in got[: len(X)]] == [e.xreplace(vals) for e in rhs]
    assert [e.xreplace(vals) for e in got[len(X) :]] == list(want)
    # observables kept; divergence of the variational system is twice the original one
    assert jp.outputs["observables"] == prog.outputs["observables"]
    assert jp.outputs["divergence"] == [2 * prog.outputs["divergence"][0]]


def test_jvp_with_columns_is_jacobian_times_each_column_exactly():
    """columns = 3: one lane carries the base and three tangents; every tangent block is
    (SymPy Jacobian of rhs) dx_c at rational points, also through a dense solve."""
    for prog in (hand_veselova(3, cubic), _dense_program(2)):
        jp = jvp_program(prog, columns=3)
        X = prog.state_symbols
        N = len(X)
        cols = [jp.state_symbols[N * c : N * (c + 1)] for c in (1, 2, 3)]
        assert jp.n_state == 4 * N and jp.param_symbols == prog.param_symbols
        assert [str(s) for s in cols[1]] == [f"d2_{s}" for s in X]
        rng = np.random.default_rng(4)
        vals = {s: sp.Rational(int(rng.integers(-9, 10)), 7) for s in jp.state_symbols}
        vals.update({s: sp.Rational(int(rng.integers(5, 30)), 9) for s in prog.param_symbols})
        pvals = {s: vals[s] for s in prog.param_symbols}
        rhs = [e.xreplace(pvals) for e in prog.to_sympy("rhs")]
        J = sp.Matrix(rhs).jacobian(X).xreplace(vals)
        got = [sp.cancel(e.xreplace(vals)) for e in jp.to_sympy("rhs")]
        assert got[:N] == [sp.cancel(e.xreplace(vals)) for e in rhs]
        for c, dX in enumerate(cols):
            want = J * sp.Matrix([vals[s] for s in dX])
            assert got[N * (c + 1) : N * (c + 2)] == [sp.cancel(e) for e in want]
    assert jvp_program(hand_veselova(3, cubic), columns=3).outputs["divergence"] == [
        4 * hand_veselova(3, cubic).outputs["divergence"][0]
    ]
    for bad in (0, 1.5, True):
        with pytest.raises(ValueError, match="columns must be a positive int"):
            jvp_program(hand_veselova(3, cubic), columns=bad)


def test_jvp_through_c_and_generated_divergence_of_jvp():
    """C kernels of the jvp program = finite differences of the rhs; the generated trace of
    the variational system is twice the program's hand-derived divergence."""
    n = 5
    prog = hand_veselova(n, cubic)
    jp = jvp_program(prog)
    x, a = _veselova_points(n, 7, seed=2, on_manifold=False)
    dx = np.random.default_rng(8).normal(size=x.shape)
    out = StructuredVectorField(jp, name="jvp").evaluate("rhs", np.hstack([x, dx]), params=a)
    h = 1e-6
    fd = (_evaluate(prog, "rhs", x + h * dx, a) - _evaluate(prog, "rhs", x - h * dx, a)) / (2 * h)
    np.testing.assert_allclose(out[:, : 2 * n], _evaluate(prog, "rhs", x, a), rtol=1e-13)
    np.testing.assert_allclose(out[:, 2 * n :], fd, rtol=1e-6, atol=1e-6 * np.max(np.abs(fd)))
    div2 = _evaluate(with_divergence(jp), "divergence", np.hstack([x, dx]), a)[:, 0]
    want = 2 * _evaluate(prog, "divergence", x, a)[:, 0]
    np.testing.assert_allclose(div2, want, rtol=1e-12, atol=1e-14 * np.max(np.abs(want)))


def test_variational_equations_along_a_trajectory():
    """Integrating the jvp program transports dx like the difference of nearby trajectories."""
    from scipy.integrate import solve_ivp

    n = 3
    prog = hand_veselova(n, cubic)
    jp = jvp_program(prog)
    x0, a = _veselova_points(n, 1, seed=4, on_manifold=True)
    dx0 = np.random.default_rng(1).normal(size=x0.shape)
    rhs = structured_numpy_kernels(prog)["rhs"]
    var = structured_numpy_kernels(jp)["rhs"]

    def flow(kern, y0):
        sol = solve_ivp(
            lambda t, y: kern.evaluate(np.zeros(1), y[:, None], a.T)[:, 0],
            (0.0, 0.5),
            y0,
            method="DOP853",
            rtol=1e-12,
            atol=1e-12,
        )
        return sol.y[:, -1]

    eps = 1e-5
    fd = (flow(rhs, (x0 + eps * dx0)[0]) - flow(rhs, (x0 - eps * dx0)[0])) / (2 * eps)
    got = flow(var, np.concatenate([x0[0], dx0[0]]))[2 * n :]
    np.testing.assert_allclose(got, fd, rtol=1e-6, atol=1e-6 * np.max(np.abs(fd)))


# ------------------------------------------------ unrolled statements and components ----


def _unrolled_program(n: int) -> IndexedProgram:
    """Unrolled vectors built from components, components of temporaries, an unrolled vector
    of an unrolled vector, a state scalar, the index and the time."""
    prog = IndexedProgram(n)
    s = prog.state_scalar("s")
    x = prog.state_vector("x")
    y = prog.state_vector("y")
    a = prog.param_vector("a")
    t = prog.time_symbol()
    xc = prog.components(x)
    u = prog.unrolled("u", [xc[k] ** 2 * xc[(k + 1) % n] + 1 for k in range(n)])
    v = prog.vector("v", x * u + y**2 + s * xc[1 % n] + prog.index)
    vc = prog.components(v)
    w = prog.scalar("w", vc[0] * vc[-1] + prog.components(u)[1 % n] + s**2 * sp.cos(t))
    r = prog.reduce("r", v * u * a + w * y)
    uc = prog.components(u)
    u2 = prog.unrolled("u2", [uc[k] * w + vc[k] * r for k in range(n)])
    z = prog.vector("z", sp.sin(v) * r / (1 + w**2) + u2 * x)
    prog.output("rhs", [s * r + w, z * y + u2, x * z + r * y * u])
    return prog


@pytest.mark.parametrize("n", [1, 3])
def test_unrolled_case_equals_exact_sympy_trace(n):
    """The trace of the SymPy Jacobian of the unrolled rhs, to 45 digits (n = 1: one row per
    vector block, paired by forward mode)."""
    prog = _unrolled_program(n)
    div = with_divergence(prog).to_sympy("divergence")[0]
    rhs = prog.to_sympy("rhs")
    X = prog.state_symbols
    trace = sum(sp.diff(rhs[i], X[i]) for i in range(len(X)))
    rng = np.random.default_rng(n)
    syms = sorted(div.free_symbols | trace.free_symbols, key=str)
    for _ in range(2):
        vals = {s: sp.Rational(int(rng.integers(-9, 10)), 5) for s in syms}
        want = trace.xreplace(vals).evalf(60)
        assert abs(div.xreplace(vals).evalf(60) - want) <= sp.Float(1e-45) * (1 + abs(want))


def test_unrolled_case_c_and_finite_differences():
    n = 4
    prog = _unrolled_program(n)
    gen = with_divergence(prog)
    rng = np.random.default_rng(3)
    x = rng.normal(size=(5, prog.n_state))
    par = rng.uniform(0.5, 2.0, size=(5, n))
    t = rng.uniform(0.0, 3.0, size=5)
    fd = _fd_trace(prog, x, par, h=1e-6, t=t)
    num = _evaluate(gen, "divergence", x, par, t)[:, 0]
    np.testing.assert_allclose(num, fd, rtol=1e-6, atol=1e-6 * np.max(np.abs(fd)))
    c = StructuredVectorField(gen, name="gen_unrolled").evaluate("divergence", x, t=t, params=par)
    np.testing.assert_allclose(c[:, 0], num, rtol=1e-12, atol=1e-13 * np.max(np.abs(num)))
    jp = jvp_program(prog)
    dx = rng.normal(size=x.shape)
    got = _evaluate(jp, "rhs", np.hstack([x, dx]), par, t)[:, prog.n_state :]
    h = 1e-6
    fdj = _evaluate(prog, "rhs", x + h * dx, par, t) - _evaluate(prog, "rhs", x - h * dx, par, t)
    fdj /= 2 * h
    np.testing.assert_allclose(got, fdj, rtol=1e-6, atol=1e-6 * np.max(np.abs(fdj)))


# ---------------------------------------------------------------- random programs ----

_UNARY = [lambda e: e, sp.sin, sp.cos, lambda e: e / (1 + e**2), lambda e: e**2]


@st.composite
def programs(draw) -> IndexedProgram:
    """A random program of scalar/reduce/vector/unrolled statements over 1-2 state vectors,
    maybe a state scalar, a parameter vector and the index; rhs blocks align with the
    states."""
    n = draw(st.integers(1, 4))
    prog = IndexedProgram(n)
    states: list[sp.Symbol] = []
    if draw(st.booleans()):
        states.append(prog.state_scalar("s"))
    states.append(prog.state_vector("x"))
    if draw(st.booleans()):
        states.append(prog.state_vector("y"))
    a = prog.param_vector("a")
    vecs = [v for v in states if v in prog.vectors] + [a]
    lanes = [s for s in states if s not in prog.vectors]

    def component() -> sp.Expr:
        v = draw(st.sampled_from([v for v in vecs if v != a] or vecs))
        return prog.components(v)[draw(st.integers(0, n - 1))]

    def lane_expr() -> sp.Expr:
        terms = []
        for _ in range(draw(st.integers(1, 3))):
            pick = draw(st.integers(0, 2)) if lanes else 0
            atom = component() if pick == 0 else draw(st.sampled_from(lanes))
            other = component() if draw(st.booleans()) else sp.Integer(1)
            terms.append(draw(st.sampled_from(_UNARY))(atom) * other)
        return sp.Add(*terms)

    def elem_expr() -> sp.Expr:
        terms = []
        for _ in range(draw(st.integers(1, 3))):
            pool = vecs + lanes + [prog.index]
            atom = component() if draw(st.integers(0, 4)) == 0 else draw(st.sampled_from(pool))
            other = draw(st.sampled_from(pool + [sp.Integer(1)]))
            terms.append(draw(st.sampled_from(_UNARY))(atom) * other)
        return sp.Add(*terms)

    for k in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["scalar", "reduce", "vector", "unrolled"]))
        if kind == "scalar":
            lanes.append(prog.scalar(f"q{k}", lane_expr()))
        elif kind == "reduce":
            lanes.append(prog.reduce(f"q{k}", elem_expr()))
        elif kind == "vector":
            vecs.append(prog.vector(f"v{k}", elem_expr()))
        else:
            vecs.append(prog.unrolled(f"v{k}", [lane_expr() for _ in range(n)]))
    blocks = []
    for s in states:
        e = elem_expr() if s in prog.vectors else lane_expr()
        if s in prog.vectors and not prog.is_indexed(e):
            e = e + 0 * s + s
        blocks.append(e)
    prog.output("rhs", blocks)
    return prog


@settings(
    max_examples=15,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(programs(), st.integers(0, 2**32 - 1))
def test_random_programs_divergence_and_jvp_match_finite_differences(prog, seed):
    """Divergence: finite differences, and the column-by-column trace to round-off;
    tangent rows: finite differences along a random direction."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1.0, 1.0, size=(3, prog.n_state))
    par = rng.uniform(-1.0, 1.0, size=(3, prog.n_params))
    diag = _fd_diagonal(prog, x, par, h=1e-6)
    fd = np.sum(diag, axis=1)
    got = _evaluate(with_divergence(prog), "divergence", x, par)[:, 0]
    scale = max(1.0, float(np.max(np.sum(np.abs(diag), axis=1))))  # no cancellation in sum
    np.testing.assert_allclose(got, fd, rtol=1e-6, atol=1e-6 * scale)
    cols = _evaluate(with_divergence(prog, columns=True), "divergence", x, par)[:, 0]
    np.testing.assert_allclose(cols, got, rtol=1e-11, atol=1e-11 * scale)
    dx = rng.uniform(-1.0, 1.0, size=x.shape)
    jvp = _evaluate(jvp_program(prog), "rhs", np.hstack([x, dx]), par)[:, prog.n_state :]
    h = 1e-6
    fdj = (_evaluate(prog, "rhs", x + h * dx, par) - _evaluate(prog, "rhs", x - h * dx, par)) / (
        2 * h
    )
    scale = max(1.0, float(np.max(np.abs(fdj))))
    np.testing.assert_allclose(jvp, fdj, rtol=1e-6, atol=1e-6 * scale)


# ------------------------------------------------------------------ dense statements ----


def _dense_program(n: int, logdet: bool = False) -> IndexedProgram:
    prog = IndexedProgram(n)
    x = prog.state_vector("x")
    y = prog.state_vector("y")
    prog.param_vector("a")
    H = prog.param_matrix("H")
    q = prog.reduce("q", x * y)
    v = prog.matvec("v", H, x**2 + q, transpose=True)
    got = prog.solve(
        "w", y + v, 3 + x**2, [(x, H, y), (1 + y, None, x)], logdet="ld" if logdet else None
    )
    w, ld = got if logdet else (got, 0)
    prog.output("rhs", [w * q + ld, v + y])
    return prog


def test_jvp_of_matvec_and_solve_is_exact():
    """matvec: the matvec of the tangent; solve: a second solve with the same K.  Exact at
    rational points (n = 2, parameters substituted before differentiating), and the NumPy
    backend agrees with finite differences at n = 4."""
    n = 2
    prog = _dense_program(n)
    jp = jvp_program(prog)
    kinds = [s.kind for s in jp.statements]
    assert kinds.count("solve") == 2 and kinds.count("matvec") >= 2
    X = prog.state_symbols
    dX = jp.state_symbols[len(X) :]
    rng = np.random.default_rng(0)
    vals = {s: sp.Rational(int(rng.integers(-6, 7)), 4) for s in X + dX + prog.param_symbols}
    pvals = {s: vals[s] for s in prog.param_symbols}
    J = sp.Matrix([e.xreplace(pvals) for e in prog.to_sympy("rhs")]).jacobian(X)
    want = (J * sp.Matrix(dX)).xreplace(vals)
    got = [sp.cancel(e.xreplace(vals)) for e in jp.to_sympy("rhs")[len(X) :]]
    assert got == [sp.cancel(e) for e in want]
    prog = _dense_program(4)
    x = rng.normal(size=(3, prog.n_state))
    dx = rng.normal(size=x.shape)
    par = rng.normal(size=(3, prog.n_params))
    got = _evaluate(jvp_program(prog), "rhs", np.hstack([x, dx]), par)[:, prog.n_state :]
    h = 1e-6
    fd = (_evaluate(prog, "rhs", x + h * dx, par) - _evaluate(prog, "rhs", x - h * dx, par)) / (
        2 * h
    )
    np.testing.assert_allclose(got, fd, rtol=1e-6, atol=1e-6 * np.max(np.abs(fd)))


def test_dense_statements_need_the_column_by_column_trace():
    """No O(n) trace rule for matvec/solve: NotImplementedError naming the kind; with
    ``columns=True`` the trace (n forward passes) matches finite differences."""
    prog = _dense_program(4)
    with pytest.raises(NotImplementedError, match="matvec"):
        with_divergence(prog)
    gen = with_divergence(prog, columns=True)
    rng = np.random.default_rng(6)
    x = rng.normal(size=(4, prog.n_state))
    par = rng.normal(size=(4, prog.n_params))
    fd = _fd_trace(prog, x, par, h=1e-6)
    got = _evaluate(gen, "divergence", x, par)[:, 0]
    np.testing.assert_allclose(got, fd, rtol=1e-6, atol=1e-6 * np.max(np.abs(fd)))
    assert sum(s.kind == "solve" for s in gen.statements) == 1 + prog.n  # x block only
    with pytest.raises(NotImplementedError, match="log-determinant"):
        jvp_program(_dense_program(3, logdet=True))
    with pytest.raises(NotImplementedError, match="log-determinant"):
        with_divergence(_dense_program(3, logdet=True), columns=True)


def test_column_by_column_trace_equals_structured_trace():
    """Two independent constructions of the same trace (Veselova with a potential, n = 6)."""
    n = 6
    prog = hand_veselova(n, cubic)
    x, a = _veselova_points(n, 10, seed=9, on_manifold=False)
    cols = _evaluate(with_divergence(prog, columns=True), "divergence", x, a)[:, 0]
    fast = _evaluate(with_divergence(prog), "divergence", x, a)[:, 0]
    np.testing.assert_allclose(cols, fast, rtol=1e-12, atol=1e-14 * np.max(np.abs(fast)))


# ------------------------------------------------------------------------- errors ----


def test_bad_inputs():
    prog = IndexedProgram(3)
    x = prog.state_vector("x")
    s = prog.state_scalar("s")
    prog.output("rhs", [x, s])
    prog.output("observables", [s], names=["s"])
    with pytest.raises(ValueError, match="no output 'divergence'"):
        jvp_program(prog, "divergence")
    with pytest.raises(ValueError, match="1 rows for 4 states"):
        divergence_block(prog, "observables")
    mis = IndexedProgram(3)
    s = mis.state_scalar("s")
    y = mis.state_vector("y")
    mis.output("rhs", [y, s])  # rows of y where the state s is
    with pytest.raises(NotImplementedError, match="do not coincide"):
        with_divergence(mis)
    # the input program is never modified
    before = list(prog.statements), dict(prog.outputs)
    with_divergence(prog)
    jvp_program(prog)
    assert (list(prog.statements), dict(prog.outputs)) == before
