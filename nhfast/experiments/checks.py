"""Checks of an example against the claims of its sources: each verdict is agreement.

A check PASSes when the finding agrees with the claim (a density claimed *not* invariant passes
when the numerical test finds it is not). The findings come from :mod:`nhfast.symbolic.chaplygin`
(basic invariant measure and phi-simplicity: García-Naranjo & Marrero 2020, Thm 3.11 and
Def. 3.19) and from :mod:`nhfast.analysis` (measure defects, density discovery, Hamiltonisation).
This module maps claims to those calls and builds :class:`~nhfast.analysis.result.Check`
objects; every derivative, divergence, flow determinant and kernel evaluation of the structured
checks is computed in :mod:`nhfast.analysis.measure`.

Reference: García-Naranjo & Marrero (2020), "The geometry of nonholonomic Chaplygin systems
revisited".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import sympy as sp

from nhfast.analysis.density import discover_density
from nhfast.analysis.hamiltonisation import hamiltonisation_report
from nhfast.analysis.measure import (
    check_measure,
    derivative_along,
    divergence_by_differences,
    expression_values,
    flow_log_det_by_differences,
    hamiltonised_fields,
    liouville_integral,
)
from nhfast.analysis.result import Check
from nhfast.experiments.catalogue import Instance, MeasureClaim
from nhfast.symbolic import invariant_measure, phi_simple

__all__: list[str] = []

HAMILTONISATION_LANES = 8  # trajectories of the Hamiltonisation flow checks (chart samples)
MEASURE_LANES = 1024  # at most this many trajectories (the first ones) for the measure checks
DISCOVERY_SAMPLES = 256  # states where X[sigma] = -div X is imposed (no integration)
DISCOVERY_SPREAD = 1e-8  # max - min of sigma_fit - sigma_claimed: "equal up to a constant"
STRUCTURED_SAMPLES = 64  # sampled states of the pointwise measure identity (structured form)
STRUCTURED_LANES = 64  # at most this many trajectories for the structured measure checks
FD_STEP = 1e-3  # relative step of the fourth-order central differences on structured kernels
FLOW_STEP = 1e-4  # relative step of the fourth-order differences of the flow (no divergence)
POINTWISE_TOL = 1e-6  # relative residual of X[log rho] + div X with finite differences
SAFETY = 10.0  # factor of the threshold rule (as in nhfast.analysis.measure.check_measure)
_EPS = float(np.finfo(float).eps)

#: The form of a check, as the report states it (figure ``"form"``).
FORM = {
    "symbolic": "symbolic (SymPy, exact)",
    "numeric": "numeric (SymPy field, generated kernels)",
    "structured": "structured numeric (C kernels of the indexed program, no SymPy unrolling)",
}


# ---------------------------------------------------------------------------------------------
# symbolic: the Chaplygin reduction
# ---------------------------------------------------------------------------------------------


def _same_up_to_constant(found: sp.Expr, expected: sp.Expr, s: list[sp.Symbol]) -> bool:
    """``d(found - expected) = 0``: derivatives of logs are rational, so ``cancel`` decides."""
    diff = sp.sympify(found) - sp.sympify(expected)
    for si in s:
        d = sp.diff(diff, si)
        if sp.cancel(sp.together(d)) != 0 and sp.simplify(d) != 0:
            return False
    return True


def _shape_symbols(system: Any) -> list[sp.Symbol]:
    s = getattr(system, "s", None)
    return list(s) if s is not None else list(system.shape)


def symbolic_checks(instance: Instance) -> list[Check]:
    """Check the sources' claims on the Chaplygin reduction symbolically.

    Runs :func:`nhfast.symbolic.chaplygin.invariant_measure` (``Theta = d sigma``) and
    :func:`nhfast.symbolic.chaplygin.phi_simple` and compares with ``instance.expected``:
    existence and, where claimed, ``sigma`` and ``phi`` up to a constant.

    Parameters
    ----------
    instance : Instance

    Returns
    -------
    list of Check
        Empty when the example has no Chaplygin description.
    """
    if instance.chaplygin is None:
        return []
    if instance.expected is None:
        return _symbolic_findings(instance.chaplygin)
    exp = instance.expected
    s = _shape_symbols(instance.chaplygin)
    checks = []

    meas = invariant_measure(instance.chaplygin)
    found = meas.sigma is not None
    figs: dict[str, Any] = {"claimed by": exp.source, "exists": found}
    if found:
        figs["sigma"] = str(meas.sigma)
    else:
        figs["reason"] = meas.reason
    if exp.basic_measure:
        figs["expected sigma"] = str(exp.sigma)
        holds = found and _same_up_to_constant(meas.sigma, exp.sigma, s)
        statement = (
            f"exp(sigma) ds dp is invariant with sigma = {exp.sigma_text or exp.sigma} "
            f"(found symbolically, equal up to a constant), as {exp.source} says"
            if holds
            else f"disagrees with {exp.source}: found sigma = {meas.sigma} ({meas.reason})"
        )
    else:
        holds = not found
        statement = (
            f"none exists ({meas.reason}), as {exp.source} says"
            if holds
            else f"disagrees with {exp.source}: found sigma = {meas.sigma}"
        )
    checks.append(Check("basic invariant measure (symbolic)", holds, statement, figs))

    ps = phi_simple(instance.chaplygin)
    figs = {"claimed by": exp.source, "phi-simple": ps.is_phi_simple}
    if ps.is_phi_simple:
        figs["phi"] = str(ps.phi)
    else:
        figs["reason"] = ps.reason
    if exp.phi_simple:
        figs["expected phi"] = str(exp.phi)
        holds = ps.is_phi_simple and _same_up_to_constant(ps.phi, exp.phi, s)
        statement = (
            f"phi-simple with phi = {exp.phi_text or exp.phi} (found symbolically, equal up "
            f"to a constant), as {exp.source} says"
            if holds
            else f"disagrees with {exp.source}: {ps.reason or f'phi = {ps.phi}'}"
        )
    else:
        holds = not ps.is_phi_simple
        statement = (
            f"not phi-simple ({ps.reason}), as {exp.source} says"
            if holds
            else f"disagrees with {exp.source}: phi-simple with phi = {ps.phi}"
        )
    checks.append(Check("phi-simple, Hamiltonisable (symbolic)", holds, statement, figs))
    return checks


def _symbolic_findings(system: Any) -> list[Check]:
    """The symbolic measure and phi-simplicity tests with no claim to compare: verdict ``----``,
    the finding in the statement."""
    unclaimed = "no claim to compare (needs SystemSpec(expected=Expectation(...)))"
    meas = invariant_measure(system)
    if meas.sigma is not None:
        found = f"exp(sigma) ds dp is invariant with sigma = {meas.sigma}"
        figs: dict[str, Any] = {"exists": True, "sigma": str(meas.sigma)}
    else:
        found = f"none exists ({meas.reason})"
        figs = {"exists": False, "reason": meas.reason}
    checks = [Check("basic invariant measure (symbolic)", None, f"{found}; {unclaimed}", figs)]
    ps = phi_simple(system)
    if ps.is_phi_simple:
        found = f"phi-simple with phi = {ps.phi}"
        figs = {"phi-simple": True, "phi": str(ps.phi)}
    else:
        found = f"not phi-simple ({ps.reason})"
        figs = {"phi-simple": False, "reason": ps.reason}
    name = "phi-simple, Hamiltonisable (symbolic)"
    checks.append(Check(name, None, f"{found}; {unclaimed}", figs))
    return checks


# ---------------------------------------------------------------------------------------------
# numerical: along trajectories and on sampled states
# ---------------------------------------------------------------------------------------------


def measure_checks(
    instance: Instance,
    x0: np.ndarray,
    t_end: float,
    params: np.ndarray | None,
    rtol: float,
    atol: float,
    threads: int,
) -> list[Check]:
    """Numerical checks of the example's density claims (``check_measure``, DOP853).

    Parameters
    ----------
    instance : Instance
    x0 : ndarray, shape (lanes, n_state)
        Initial states.
    t_end : float
        Final time.
    params : ndarray, shape (n_params,), or None
    rtol, atol : float
        Tolerances of the integration (the defect threshold follows from ``rtol``).
    threads : int

    Returns
    -------
    list of Check
        One per ``instance.measure_claims``; ``holds`` says whether the finding agrees with
        the claim.
    """
    out = []
    for k, claim in enumerate(instance.measure_claims):
        inner = check_measure(
            instance.vector_field,
            claim.density,
            x0,
            t=t_end,
            params=params,
            rtol=rtol,
            atol=atol,
            threads=threads,
            # Liouville's formula (variational equations) validates ell once; the same
            # trajectories and ell serve the later densities
            n_jacobian=4 if k == 0 else 0,
        )
        expect = "invariant" if claim.invariant else "not invariant"
        if inner.holds is None:
            holds, statement = None, inner.statement
        else:
            holds = inner.holds == claim.invariant
            found = "invariant" if inner.holds else "not invariant"
            how = "as expected" if holds else f"but expected {expect}"
            statement = f"{found}, {how} ({claim.source}): {inner.statement}"
        figures = {"expected": expect, "claimed by": claim.source, **inner.figures}
        out.append(
            Check(
                f"measure {claim.label} (numerical)",
                holds,
                statement,
                figures,
                inner.series,
                inner.samples,
            )
        )
    return out


def discovery_check(instance: Instance, seed: int, params: np.ndarray | None) -> Check:
    """Density discovery (``discover_density``) compared with the example's claims.

    Parameters
    ----------
    instance : Instance
    seed : int
        The states are ``instance.sample(DISCOVERY_SAMPLES, seed + 1)``.
    params : ndarray, shape (n_params,), or None

    Returns
    -------
    Check
        PASS when existence agrees with the claim and a found ``sigma`` equals the claimed
        log density up to an additive constant (spread at most ``DISCOVERY_SPREAD``).
    """
    vf = instance.vector_field
    variables = instance.density_variables or vf.states[: vf.split or vf.n_state // 2]
    x = instance.sample(DISCOVERY_SAMPLES, seed + 1)
    fit = discover_density(vf, x, params=params, variables=list(variables))
    inner = fit.to_check()
    name = f"density discovery: exp(sigma({', '.join(map(str, variables))})) (numerical)"
    if instance.expected is None and instance.log_density is None:
        statement = f"{inner.statement}; no claim to compare (needs SystemSpec(density=...))"
        return Check(name, None, statement, inner.figures)
    if instance.expected is not None:
        want, source = instance.expected.basic_measure, instance.expected.source
    else:  # a claimed invariant density, no claim about a Chaplygin reduction
        want = True
        source = next((c.source for c in instance.measure_claims if c.invariant), "the claim")
    figures = {"expected": "exists" if want else "none", **inner.figures}
    if fit.exists != want:
        found = "found" if fit.exists else "none found"
        statement = f"{found}, but expected {'one' if want else 'none'} ({source}): "
        return Check(name, False, statement + fit.statement, figures)
    if not fit.exists or instance.log_density is None:
        found = "found" if fit.exists else "none found"
        return Check(name, True, f"{found}, as expected ({source}): {fit.statement}", figures)
    # the fitted sigma must be the claimed log density up to an additive constant
    label = next(
        (c.label for c in instance.measure_claims if c.invariant), str(instance.log_density)
    )
    both = expression_values(vf, [fit.sigma, instance.log_density], x, params)
    diff = both[:, 0] - both[:, 1]
    spread = float(np.max(diff) - np.min(diff))
    figures["spread of sigma_fit - sigma_claimed on the samples"] = spread
    if spread <= DISCOVERY_SPREAD:
        statement = (
            f"found ({fit.kind}, relative residual {fit.residual:.1e}): equal to the claimed "
            f"density {label} up to a constant factor (spread of log rho {spread:.1e} on "
            f"{len(x)} samples), as {source} says"
        )
        return Check(name, True, statement, figures)
    statement = (
        f"found ({fit.kind}), but it differs from the claimed density {label}: spread of "
        f"log rho {spread:.1e} > {DISCOVERY_SPREAD:g} ({fit.statement})"
    )
    return Check(name, False, statement, figures)


def hamiltonisation_checks(instance: Instance, seed: int, params: np.ndarray | None) -> list[Check]:
    """Numerical Hamiltonisation checks in the Chaplygin chart (``hamiltonisation_report``).

    Parameters
    ----------
    instance : Instance
    seed : int
        Seed of ``instance.chart_sampler`` (``HAMILTONISATION_LANES`` states).
    params : ndarray, shape (n_params,), or None

    Returns
    -------
    list of Check
        Empty without a chart sampler; with a claim, each verdict is agreement with it (a
        system claimed not phi-simple must fail the flow checks).
    """
    if instance.chart_sampler is None or instance.chaplygin is None:
        return []
    x0 = instance.chart_sampler(np.random.default_rng(seed), HAMILTONISATION_LANES)
    rep = hamiltonisation_report(instance.chaplygin, x0, instance.chart_t, params=params)
    # the symbolic phi-simplicity test is already in symbolic_checks (compared with the claim)
    inner = [c for c in rep.checks if "(symbolic)" not in c.name]
    if instance.expected is None:
        # no claim: a check that holds confirms the symbolic phi; one that fails (a system
        # that is not phi-simple) disagrees with nothing
        return [
            c
            if c.holds is not False
            else Check(
                c.name,
                None,
                f"{c.statement}; no claim to compare (needs SystemSpec(expected=...))",
                c.figures,
                c.series,
                c.samples,
            )
            for c in inner
        ]
    want, source = instance.expected.phi_simple, instance.expected.source
    out = []
    for c in inner:
        if c.holds is None:
            out.append(c)
            continue
        holds = c.holds == want
        found = "holds" if c.holds else "fails"
        how = "as expected" if holds else f"but expected it to {'hold' if want else 'fail'}"
        # a check that holds as claimed speaks for itself; otherwise say what was expected
        statement = c.statement if (holds and want) else f"{found}, {how} ({source}): {c.statement}"
        out.append(
            Check(
                c.name,
                holds,
                statement,
                {"expected": "holds" if want else "fails", **c.figures},
                c.series,
                c.samples,
            )
        )
    return out


# ---------------------------------------------------------------------------------------------
# structured numeric: instances that hold only a structured field (large n, engine inertias)
# ---------------------------------------------------------------------------------------------


def _log_rho(instance: Instance, claim: MeasureClaim, x: np.ndarray, params: Any) -> np.ndarray:
    """``log rho`` of a claim at states ``x`` (..., n_state), from the observable kernel."""
    if claim.observable is None:
        if claim.density is None or not claim.density.is_constant():
            raise RuntimeError(f"claim {claim.label!r} has neither an observable nor a constant")
        return np.full(x.shape[:-1], float(sp.log(claim.density)))
    name, factor = claim.observable
    k = list(_program(instance).output_names["observables"]).index(name)
    return np.asarray(factor * instance.evaluate("observables", x, params)[..., k])


def _program(instance: Instance) -> Any:
    """The indexed program of a structured instance's field."""
    return getattr(instance.vector_field, "program")  # noqa: B009 (VectorField has none)


def _rhs(instance: Instance, params: Any) -> Callable[[np.ndarray], np.ndarray]:
    """``X`` as a function of states (the rhs kernel)."""
    return lambda y: instance.evaluate("rhs", y, params)


def pointwise_measure_check(instance: Instance, seed: int, params: np.ndarray | None) -> Check:
    """``X[log rho] + div X = 0`` on sampled states for the claimed invariant density.

    The structured counterpart of the symbolic ``Theta = d sigma`` check and of density
    discovery (García-Naranjo & Marrero 2020, Thm 3.11: ``rho`` is invariant iff
    ``div(rho X) = 0``): ``log rho`` from the field's observable kernel, ``X[log rho]`` by a
    central difference along ``X``, ``div X`` from the generated divergence kernel when the
    program has one (cross-checked against central differences of the rhs kernel), else from
    those differences (fourth order: :func:`nhfast.analysis.measure.derivative_along`,
    :func:`~nhfast.analysis.measure.divergence_by_differences`). On the constraint manifold the
    ambient divergence is the Liouville one (``|gamma|^2`` and ``b . m`` are first integrals of
    the ambient field).

    Parameters
    ----------
    instance : Instance
        A structured instance with an invariant claim given by an observable.
    seed : int
        States ``instance.sample(STRUCTURED_SAMPLES, seed + 1)``.
    params : ndarray or None

    Returns
    -------
    Check
        PASS when the relative residual ``||X[log rho] + div X|| / ||div X||`` is at most the
        threshold ``max(POINTWISE_TOL, SAFETY * E)`` (``E``: change of the residual when the
        difference steps double) and a density is claimed to exist.
    """
    exp = instance.expected
    claim = next(c for c in instance.measure_claims if c.invariant)
    x = instance.sample(STRUCTURED_SAMPLES, seed + 1)
    has_div = "divergence" in _program(instance).outputs
    rhs = _rhs(instance, params)
    fd = [divergence_by_differences(rhs, x, st) for st in (FD_STEP, 2 * FD_STEP)]
    figures: dict[str, Any] = {
        "form": FORM["structured"],
        "claimed by": claim.source,
        "density": claim.label,
        "log rho": f"{claim.observable[1]:g} * observable {claim.observable[0]!r}"
        if claim.observable
        else "constant",
        "sampled states": len(x),
    }
    if has_div:
        div = instance.evaluate("divergence", x, params)[:, 0]
        how = "generated divergence kernel"
        figures["max |div X (kernel) - div X (differences)|"] = float(np.max(np.abs(div - fd[0])))
    else:
        div = fd[0]
        how = "central differences of the rhs kernel (the program has no divergence output)"
    figures["divergence"] = how
    scale = float(np.linalg.norm(div))
    X = rhs(x)
    along = [
        derivative_along(lambda y: _log_rho(instance, claim, y, params), x, X, st)
        for st in (FD_STEP, 2 * FD_STEP)
    ]
    res = along[0] + div
    res2 = along[1] + (div if has_div else fd[1])
    rel = float(np.linalg.norm(res)) / scale if scale > 0 else float(np.linalg.norm(res))
    err = float(np.linalg.norm(res - res2)) / scale if scale > 0 else 0.0
    threshold = max(POINTWISE_TOL, SAFETY * err)
    figures.update(
        {
            "relative residual ||X[log rho] + div X|| / ||div X||": rel,
            "error estimate (steps doubled)": err,
            "threshold": threshold,
            "||div X|| (the Lebesgue density's residual, control)": scale,
        }
    )
    found = rel <= threshold
    want = exp.basic_measure if exp is not None else True
    name = "basic invariant measure (structured numeric: X[log rho] = -div X on samples)"
    sigma = (exp.sigma_text if exp is not None else "") or claim.label
    if found == want:
        statement = (
            f"rho = {claim.label} satisfies div(rho X) = 0 on {len(x)} sampled states "
            f"(relative residual {rel:.1e} <= {threshold:.1e}, sigma = {sigma}), as "
            f"{claim.source} says"
        )
    else:
        statement = (
            f"disagrees with {claim.source}: relative residual of div(rho X) = 0 for rho = "
            f"{claim.label} is {rel:.1e} (threshold {threshold:.1e})"
        )
    return Check(name, found == want, statement, figures)


def structured_measure_checks(
    instance: Instance,
    x0: np.ndarray,
    t_end: float,
    params: np.ndarray | None,
    rtol: float,
    atol: float,
    threads: int,
    n_times: int = 51,
) -> list[Check]:
    """The density claims along trajectories of a structured field (Liouville's integral).

    The structured counterpart of :func:`measure_checks` (``check_measure``): with a
    ``divergence`` output the field gets Liouville's integral ``ell`` as one more state
    (``with_divergence``) and ``defect(t) = log rho(x(t)) - log rho(x(0)) + ell(t)``, with
    ``log rho`` from the observable kernel; without it, ``ell`` is replaced by
    ``log |det DPhi_t|`` from central differences of the flow (on the first two trajectories,
    one above 32 states; :func:`nhfast.analysis.measure.flow_log_det_by_differences`).
    Threshold rule as in ``check_measure``: ``SAFETY * max(E, 100 eps (1 + S))`` with ``E``
    the change of the defect at tolerances a thousand times tighter (for the differences: with
    the step doubled).

    Parameters
    ----------
    instance : Instance
        A structured instance.
    x0 : ndarray, shape (lanes, n_state)
        Initial states (the first ``STRUCTURED_LANES``, or one or two for the differences).
    t_end : float
        Final time.
    params : ndarray, shape (n_params,), or None
    rtol, atol : float
        Tolerances of the integration.
    threads : int
    n_times : int
        Output times on ``[0, t_end]``.

    Returns
    -------
    list of Check
        One per ``instance.measure_claims``; ``holds`` is agreement with the claim.
    """
    vf = instance.vector_field
    times = np.linspace(0.0, t_end, n_times)
    has_div = "divergence" in _program(instance).outputs
    # the differences integrate 8 n_state + 2 trajectories per lane: two lanes, one when large
    x0 = x0[:STRUCTURED_LANES] if has_div else x0[: 2 if vf.n_state <= 32 else 1]
    kw: dict[str, Any] = dict(method="dop853", threads=threads)
    if has_div:
        tols = ((rtol, atol), (max(rtol / 1000.0, 1e-14), atol / 1000.0))
        runs = [
            liouville_integral(vf, x0, times, params, rtol=rt, atol=at, **kw) for rt, at in tols
        ]
        how = "Liouville's integral of the generated divergence (one more state)"
    else:
        rt = min(rtol, 1e-12)
        runs = [
            flow_log_det_by_differences(vf, x0, times, params, step=st, rtol=rt, atol=atol, **kw)
            for st in (FLOW_STEP, 2 * FLOW_STEP)
        ]
        how = (
            "log |det DPhi_t| by central differences of the flow (no divergence output; "
            f"{len(x0)} trajectories, rtol {rt:g})"
        )
    out = []
    for claim in instance.measure_claims:
        defects = []
        for xs, ell in runs:
            logr = _log_rho(instance, claim, xs, params)
            defects.append(logr - logr[:, :1] + ell)
        logr = _log_rho(instance, claim, runs[0][0], params)
        defect, err = defects[0], np.abs(defects[0] - defects[1])
        S = float(np.nanmax(np.abs(logr)) + np.nanmax(np.abs(runs[0][1])))
        E = float(np.nanmax(err))
        threshold = SAFETY * max(E, 100 * _EPS * (1 + S))
        max_def = float(np.nanmax(np.abs(defect)))
        found = bool(max_def <= threshold)
        expect = "invariant" if claim.invariant else "not invariant"
        agree = found == claim.invariant
        verb = "invariant" if found else "not invariant"
        how_ = "as expected" if agree else f"but expected {expect}"
        rel = "<=" if found else ">"
        statement = (
            f"{verb}, {how_} ({claim.source}): max |defect| {max_def:.2e} {rel} threshold "
            f"{threshold:.2e}"
        )
        figures = {
            "form": FORM["structured"],
            "expected": expect,
            "claimed by": claim.source,
            "volume change": how,
            "trajectories": len(x0),
            "t_final": float(t_end),
            "rtol": float(rtol if has_div else min(rtol, 1e-12)),
            "max |defect|": max_def,
            "error estimate E": E,
            "threshold": threshold,
            "max |ell|": float(np.nanmax(np.abs(runs[0][1]))),
        }
        absd = np.abs(defect)
        out.append(
            Check(
                f"measure {claim.label} (structured numeric)",
                agree,
                statement,
                figures,
                {"t": times, "max |defect|": absd.max(axis=0), "error estimate": err.max(axis=0)},
                {"final defect": defect[:, -1].copy(), "max |defect|": absd.max(axis=1)},
            )
        )
    return out


def _htilde_field(
    instance: Instance, claim: MeasureClaim, x: np.ndarray, params: Any, step: float
) -> tuple[np.ndarray, np.ndarray]:
    """The tau-field ``Y`` of ``x' = X`` and the Hamiltonian field ``Z`` of ``Htilde`` at ``x``
    (:func:`nhfast.analysis.measure.hamiltonised_fields`), with ``phi = sigma / (r - 1)``
    (``sigma = log rho`` of the claim, ``r = n - 1``) and ``E`` the energy observable."""
    prog = _program(instance)
    n = prog.n
    ke = list(prog.output_names["observables"]).index("energy")
    return hamiltonised_fields(
        _rhs(instance, params),
        lambda y: _log_rho(instance, claim, y, params) / (n - 2),
        lambda y: instance.evaluate("observables", y, params)[..., ke],
        x,
        step,
    )


def structured_hamiltonisation_check(
    instance: Instance, seed: int, params: np.ndarray | None
) -> Check:
    """phi-simplicity / Hamiltonisation, structured: is the tau-field Hamiltonian for Htilde?

    The structured counterpart of the symbolic phi-simplicity test and of the chart checks
    (García-Naranjo & Marrero 2020, Thm 3.21 / Cor. 3.22: a phi-simple system becomes
    canonical Hamiltonian with ``Htilde = E`` after ``dt = exp(-phi) dtau``,
    ``ptilde = exp(phi) p``; for rank ``r >= 3`` its measure is ``sigma = (r - 1) phi``, so
    ``phi = sigma / (r - 1)`` is the only candidate). On sampled states of the constraint
    manifold the tau-field of the structured rhs kernel is compared with the Hamiltonian field
    of ``Htilde`` on ``T*S^{n-1}`` (:func:`_htilde_field`).

    Parameters
    ----------
    instance, params
        As for :func:`pointwise_measure_check` (``phi`` from its invariant claim).
    seed : int
        States ``instance.sample(STRUCTURED_SAMPLES, seed + 2)``.

    Returns
    -------
    Check
        PASS when the finding (relative difference ``||Y - Z|| / ||Y||`` at most
        ``max(POINTWISE_TOL, SAFETY * E)``, ``E`` its change when the steps double) agrees with
        the claim.
    """
    exp = instance.expected
    claim = next(c for c in instance.measure_claims if c.invariant and c.observable)
    x = instance.sample(STRUCTURED_SAMPLES, seed + 2)
    fields = [_htilde_field(instance, claim, x, params, st) for st in (FD_STEP, 2 * FD_STEP)]
    Y, Z = fields[0]
    scale = float(np.linalg.norm(Y))
    rel = float(np.linalg.norm(Y - Z)) / scale
    err = float(np.linalg.norm((Y - Z) - (fields[1][0] - fields[1][1]))) / scale
    threshold = max(POINTWISE_TOL, SAFETY * err)
    found = rel <= threshold
    want = exp.phi_simple if exp is not None else True
    source = exp.source if exp is not None else claim.source
    n = _program(instance).n
    figures = {
        "form": FORM["structured"],
        "claimed by": source,
        "expected": "phi-simple" if want else "not phi-simple",
        "phi": f"sigma / (r - 1) = log rho / {n - 2}, rho = {claim.label}",
        "sampled states": len(x),
        "relative difference ||Y - Z|| / ||Y||": rel,
        "error estimate (steps doubled)": err,
        "threshold": threshold,
    }
    name = "phi-simple, Hamiltonisable (structured numeric: tau-field = Htilde field)"
    text = (
        f"the field after dt = exp(-phi) dtau, mtilde = exp(phi) m with phi = sigma/(r-1) "
        f"{'is' if found else 'is not'} the Hamiltonian field of Htilde = E on T*S^{n - 1} "
        f"(relative difference {rel:.1e} {'<=' if found else '>'} {threshold:.1e} on "
        f"{len(x)} sampled states)"
    )
    if found == want:
        return Check(name, True, f"{text}, as {source} says", figures)
    return Check(name, False, f"{text}, but {source} says the opposite", figures)
