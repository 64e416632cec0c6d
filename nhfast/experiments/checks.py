"""Checks of an example against the claims of its sources: each verdict is agreement.

A check PASSes when the finding agrees with the claim (a density claimed *not* invariant passes
when the numerical test finds it is not). The findings come from :mod:`nhfast.symbolic.chaplygin`
(basic invariant measure and phi-simplicity: García-Naranjo & Marrero 2020, Thm 3.11 and
Def. 3.19) and from :mod:`nhfast.analysis` (measure defects, density discovery, Hamiltonisation).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import sympy as sp

from nhfast.analysis.density import discover_density
from nhfast.analysis.hamiltonisation import hamiltonisation_report
from nhfast.analysis.measure import check_measure
from nhfast.analysis.result import Check
from nhfast.codegen import numpy_rows
from nhfast.experiments.catalogue import Instance
from nhfast.symbolic import invariant_measure, phi_simple

__all__ = [
    "symbolic_checks",
    "measure_checks",
    "discovery_check",
    "hamiltonisation_checks",
    "HAMILTONISATION_LANES",
    "MEASURE_LANES",
    "DISCOVERY_SAMPLES",
    "DISCOVERY_SPREAD",
]

HAMILTONISATION_LANES = 8  # trajectories of the Hamiltonisation flow checks (chart samples)
MEASURE_LANES = 1024  # at most this many trajectories (the first ones) for the measure checks
DISCOVERY_SAMPLES = 256  # states where X[sigma] = -div X is imposed (no integration)
DISCOVERY_SPREAD = 1e-8  # max - min of sigma_fit - sigma_claimed: "equal up to a constant"


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
    if instance.chaplygin is None or instance.expected is None:
        return []
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
    if instance.expected is None:
        return Check(name, inner.holds, inner.statement, inner.figures)
    want, source = instance.expected.basic_measure, instance.expected.source
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
    par = np.zeros((1, 0)) if params is None else np.atleast_2d(np.asarray(params, dtype=float))
    both = numpy_rows([*vf.states, *vf.params], [fit.sigma, instance.log_density])(x, par)
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
        return inner
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
