"""Every bad input gets a specific exception naming the argument."""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp

import nhfast as nh


def test_unknown_method(oscillator):
    with pytest.raises(ValueError, match="method must be one of"):
        nh.integrate(oscillator, [1.0, 0.0], [0, 1], method="euler", params=[1.0])


@pytest.mark.parametrize(
    "x0,match",
    [
        ([1.0, 0.0, 3.0], r"x0 must have shape \(2,\)"),
        (np.ones((3, 3)), r"x0 must have shape"),
        (np.ones((2, 2, 2)), "x0 must have 1 or 2 dimension"),
        ([np.nan, 0.0], "x0 contains NaN"),
        ([np.inf, 0.0], "x0 contains NaN or infinite"),
    ],
)
def test_bad_x0(oscillator, x0, match):
    with pytest.raises(ValueError, match=match):
        nh.integrate(oscillator, x0, [0, 1], params=[1.0])


def test_x0_not_numeric(oscillator):
    with pytest.raises(TypeError, match="x0 must be an array of real numbers"):
        nh.integrate(oscillator, ["a", "b"], [0, 1], params=[1.0])


@pytest.mark.parametrize(
    "t,match",
    [
        ([0, 1, 1], "strictly monotonic"),
        ([0, 2, 1], "strictly monotonic"),
        ([], "at least one"),
        ([[0, 1]], "t_eval must have 1 dimension"),
        ([0, np.nan], "t_eval contains NaN"),
    ],
)
def test_bad_t_eval(oscillator, t, match):
    with pytest.raises(ValueError, match=match):
        nh.integrate(oscillator, [1.0, 0.0], t, params=[1.0])


def test_missing_and_bad_params(oscillator):
    with pytest.raises(ValueError, match="params is required: missing values for w"):
        nh.integrate(oscillator, [1.0, 0.0], [0, 1])
    with pytest.raises(ValueError, match=r"params must have shape \(1,\) or \(3, 1\)"):
        nh.integrate(oscillator, np.ones((3, 2)), [0, 1], params=np.ones((2, 1)))
    with pytest.raises(ValueError, match="params contains NaN"):
        nh.integrate(oscillator, [1.0, 0.0], [0, 1], params=[np.nan])


def test_params_given_to_parameterless_system(kepler):
    with pytest.raises(ValueError, match="has no parameters"):
        nh.integrate(kepler, [1, 0, 0, 1], [0, 1], params=[1.0])


@pytest.mark.parametrize(
    "kw,exc,match",
    [
        ({"rtol": -1}, ValueError, "rtol must be a positive finite"),
        ({"atol": np.nan}, ValueError, "atol must be a positive finite"),
        ({"rtol": "x"}, TypeError, "rtol must be a positive number"),
        ({"threads": 0}, ValueError, "threads must be a positive integer"),
        ({"threads": 1.5}, ValueError, "threads must be a positive integer"),
        ({"h": 0.0}, ValueError, "h must be a positive finite"),
        ({"max_steps": 0}, ValueError, "max_steps must be a positive integer"),
    ],
)
def test_bad_options(oscillator, kw, exc, match):
    with pytest.raises(exc, match=match):
        nh.integrate(oscillator, [1.0, 0.0], [0, 1], params=[1.0], **kw)


def test_fixed_step_needs_h_and_budget(oscillator):
    with pytest.raises(
        ValueError, match="h \\(the step size\\) is required for the fixed-step method 'gauss4'"
    ):
        nh.integrate(oscillator, [1.0, 0.0], [0, 1], method="gauss4", params=[1.0])
    with pytest.raises(ValueError, match=r"h=1e-300 needs inf steps, more than max_steps"):
        nh.integrate(oscillator, [1.0, 0.0], [0, 1e300], method="rk4", h=1e-300, params=[1.0])
    with pytest.raises(ValueError, match=r"h=1e-300 needs 1e\+300 steps, more than max_steps"):
        nh.integrate(oscillator, [1.0, 0.0], [0, 1], method="rk4", h=1e-300, params=[1.0])
    with pytest.raises(ValueError, match="needs 1000000 steps, more than max_steps=1000"):
        nh.integrate(
            oscillator, [1.0, 0.0], [0, 1], method="rk4", h=1e-6, params=[1.0], max_steps=1000
        )


def test_leapfrog_on_non_separable_h():
    q, p = sp.symbols("q p")
    ham = nh.HamiltonianSystem([q], [p], p**2 * (1 + q**2) / 2)
    with pytest.raises(ValueError, match="leapfrog.*position equation dq/dt depends on q"):
        nh.integrate(ham, [1.0, 0.0], [0, 1], method="leapfrog", h=0.1)
    vf = nh.VectorField([q, p], [p, -q])
    with pytest.raises(ValueError, match="leapfrog.*no split"):
        nh.integrate(vf, [1.0, 0.0], [0, 1], method="leapfrog", h=0.1)


def test_system_type():
    with pytest.raises(TypeError, match="system must be a VectorField"):
        nh.integrate(lambda t, y: y, [1.0], [0, 1])


def test_vectorfield_construction_errors():
    x, y, a, b = sp.symbols("x y a b")
    with pytest.raises(ValueError, match="rhs has 1 expressions for 2 states"):
        nh.VectorField([x, y], [y])
    with pytest.raises(
        ValueError, match="rhs uses symbols that are neither states, params nor time: b"
    ):
        nh.VectorField([x, y], [y, -a * x + b], params=[a])
    with pytest.raises(ValueError, match="observables uses symbols.*: b"):
        nh.VectorField([x], [x], observables={"e": b})
    with pytest.raises(TypeError, match="states must contain sympy Symbols"):
        nh.VectorField(["x"], [x])
    with pytest.raises(ValueError, match="states lists a symbol more than once: x"):
        nh.VectorField([x, x], [x, x])
    with pytest.raises(ValueError, match="both a state and a parameter"):
        nh.VectorField([x], [x], params=[x])
    with pytest.raises(ValueError, match="q and p must be non-empty and of equal length"):
        nh.HamiltonianSystem([x, y], [a], x)
    with pytest.raises(ValueError, match="rhs uses undefined functions, which have no C equiv"):
        f = sp.Function("f")
        nh.VectorField([x], [f(x)])


def test_nonfinite_trajectory_is_reported(oscillator):
    """x' = x^2 blows up at t = 1/x0: the lane reports a failure, the others finish."""
    x = sp.Symbol("x")
    vf = nh.VectorField([x], [x**2])
    for method, status in (("dop853", 2), ("rk4", 1)):
        with pytest.raises(nh.IntegrationError) as info:
            nh.integrate(vf, [[0.1], [2.0]], [0.0, 1.0], method=method, h=0.01)
        err = info.value
        assert err.status[0] == 0 and err.status[1] == status
        assert np.isnan(err.result.y[1, -1, 0]) and np.isfinite(err.result.y[0, -1, 0])
        with pytest.warns(nh.IntegrationWarning, match="1 of 2 trajectories failed"):
            res = nh.integrate(
                vf, [[0.1], [2.0]], [0.0, 1.0], method=method, h=0.01, keep_failed=True
            )
        assert list(res.failed) == [False, True]


def test_max_steps_reported(oscillator):
    with pytest.raises(nh.IntegrationError, match="maximum number of steps"):
        nh.integrate(oscillator, [1.0, 0.0], [0, 100], params=[1.0], max_steps=50)


def test_implicit_solve_cap_reported(oscillator):
    """A stiff step that fixed-point iteration cannot solve is reported, not kept."""
    with pytest.raises(nh.IntegrationError, match="did not converge") as info:
        nh.integrate(
            oscillator, [1.0, 0.0], [0, 1], method="gauss4", h=0.5, params=[10.0], max_iter=5
        )
    assert info.value.status[0] == 4
    res = nh.integrate(oscillator, [1.0, 0.0], [0, 1], method="gauss4", h=0.05, params=[10.0])
    assert res.stats["iterations"][0] <= 100 * res.stats["steps"][0]


# --- issue 14, item 4: rejected at construction or call time, the argument and the fix named ---


def test_complex_constant_in_rhs_rejected_at_construction():
    x, y = sp.symbols("x y")
    with pytest.raises(ValueError, match=r"rhs\[1\] has complex constants \(I\): I\*x"):
        nh.VectorField([x, y], [y, sp.I * x])
    with pytest.raises(ValueError, match=r"observables\['e'\] has complex constants"):
        nh.VectorField([x], [x], observables={"e": x + 2j})


@pytest.mark.parametrize(
    "expr,what",
    [
        (lambda x: 1 / (x - x), "zoo"),
        (lambda x: sp.nan * x, "nan"),
        (lambda x: sp.oo * x, "oo"),
        (lambda x: -sp.oo * x, "-oo"),
    ],
)
def test_nonfinite_rhs_rejected_at_construction(expr, what):
    x = sp.Symbol("x")
    with pytest.raises(ValueError, match=rf"rhs\[0\] is not finite \({what}\): "):
        nh.VectorField([x], [expr(x)])


@pytest.mark.parametrize(
    "kw,match",
    [
        ({"x0": [1.0 + 1.0j, 0.0]}, "x0 must be real"),
        ({"x0": np.array([1.0, 0.0], dtype=complex)}, "x0 must be real"),
        ({"params": [1.0 + 0.5j]}, "params must be real"),
        ({"t_eval": [0.0, 1.0j]}, "t_eval must be real"),
    ],
)
def test_complex_inputs_refused_not_truncated(oscillator, kw, match):
    args = {"x0": [1.0, 0.0], "t_eval": [0.0, 1.0], "params": [1.0], **kw}
    with pytest.raises(TypeError, match=match):
        nh.integrate(oscillator, args["x0"], args["t_eval"], params=args["params"])


def test_same_name_different_assumptions_is_named():
    x = sp.Symbol("x")
    xr = sp.Symbol("x", real=True)
    with pytest.raises(
        ValueError,
        match=r"rhs uses a symbol whose name matches a declared one but whose assumptions "
        r"differ: uses Symbol\('x', real=True\), declared Symbol\('x'\)",
    ):
        nh.VectorField([x], [-xr])


def test_undeclared_symbol_in_h_is_reported_in_h():
    q, p, b = sp.symbols("q p b")
    # b enters only the energy, so the right-hand side alone does not show it
    with pytest.raises(ValueError, match="^H uses symbols that are neither states, params nor "):
        nh.HamiltonianSystem([q], [p], p**2 / 2 + b)
    with pytest.raises(ValueError, match="^H uses symbols .*: b"):
        nh.HamiltonianSystem([q], [p], p**2 / 2 + b * q)


def test_bad_cflags_quoting_names_the_variable(monkeypatch):
    from nhfast import _jit

    monkeypatch.setenv("NHFAST_CFLAGS", "-O2 '-DX")
    with pytest.raises(ValueError, match="NHFAST_CFLAGS=.*No closing quotation.*quoting"):
        _jit.compile_flags()
