"""A system of your own, in the form ``nhfast run`` checks: :class:`SystemSpec`.

``nhfast run path/to/file.py:factory`` calls ``factory()`` and gives what it returns to
:func:`to_instance`, which builds the :class:`~nhfast.experiments.instance.Instance` every
catalogue entry is built as; the run then goes through the same checks and the same report
(:func:`nhfast.experiments.runner.run_instance`). The factory may return

* a :class:`SystemSpec` -- the system and what is claimed about it (an invariant density,
  first integrals, constraints, a claim about the Chaplygin reduction), with parameter values
  and a sampler of initial states;
* or, with every claim left out, the system alone: a :class:`~nhfast.vectorfield.VectorField`
  (or :class:`~nhfast.structured_field.StructuredVectorField`), a
  :class:`~nhfast.symbolic.systems.NonholonomicSystem` (integrated in its Hamel form, states
  ``(q, v)``), or a :class:`~nhfast.symbolic.systems.ChaplyginSystem` /
  :class:`~nhfast.symbolic.systems.ReducedChaplyginSystem` (integrated in its reduced chart,
  states ``(s, p)``).

A check that needs something the factory did not give (an energy observable, a claimed
density, a Chaplygin system) is reported as ``not run: needs ...``, never left out.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import sympy as sp

from nhfast.analysis.measure import liouville_field
from nhfast.errors import SystemSpecError
from nhfast.experiments.instance import (
    STRUCTURED,
    SYMBOLIC,
    Expectation,
    Instance,
    MeasureClaim,
    Sampler,
    normal_sampler,
)
from nhfast.structured_field import StructuredVectorField
from nhfast.symbolic import chaplygin_equations, hamel_equations
from nhfast.symbolic.systems import ChaplyginSystem, NonholonomicSystem, ReducedChaplyginSystem
from nhfast.vectorfield import VectorField

__all__ = ["SystemSpec"]

#: What a factory may return, for messages.
ACCEPTED = (
    "a SystemSpec, a VectorField, a StructuredVectorField, a NonholonomicSystem, a "
    "ChaplyginSystem or a ReducedChaplyginSystem"
)


@dataclass
class SystemSpec:
    """A system and what is claimed about it: what ``nhfast run FILE.py:FACTORY`` checks.

    Only ``system`` is required; every check whose data is left out is reported as
    ``not run: needs ...``.

    Attributes
    ----------
    system : VectorField, NonholonomicSystem, ChaplyginSystem or ReducedChaplyginSystem
        The equations (a ``StructuredVectorField`` too). A ``NonholonomicSystem`` is
        integrated in its Hamel form (states ``(q, v)``,
        :func:`nhfast.symbolic.hamel_equations`); a Chaplygin system in its reduced chart
        (states ``(s, p)``, :func:`nhfast.symbolic.chaplygin_equations`), where the symbolic
        measure and phi-simplicity tests and the Hamiltonisation checks run too.
    params : mapping of str to float, or sequence of float, optional
        Parameter values, by name or in the order of the vector field's ``params``; needed
        when the system has parameters (``nhfast run --param NAME=VALUE`` adds or overrides).
    sampler : callable, optional
        ``sampler(rng, lanes) -> ndarray (lanes, n_state)`` of initial states (``rng`` a
        ``numpy.random.Generator``). Default: standard normal states -- give one when the
        states must lie on a constraint manifold or in a chart.
    t_end : float
        Final time of the runs.
    title : str, optional
        Heading of the report (default: the factory's name).
    energy : str, optional
        Name of the energy observable (default ``"energy"`` when the field has one).
    observables : mapping of str to sympy.Expr
        More observables (SymPy fields only), e.g. first integrals to name in ``integrals``.
    integrals : mapping of str to str
        Claimed first integrals besides the energy: observable (or state) name -> who claims
        it.
    constraints : mapping of str to float
        Observables (or states) that must keep a value (e.g. ``{"gamma_norm": 1.0}``).
    density : sympy.Expr, optional
        A claimed invariant density ``rho`` with respect to Lebesgue measure in the integrated
        states (an expression in the states and parameters); checked along trajectories
        (Liouville's formula) and against density discovery.
    source : str
        Who claims ``density`` (and ``expected``), for the report.
    density_label : str, optional
        How the report names ``density`` (default: the expression; ``"Lebesgue"`` for 1).
    measure_claims : sequence of MeasureClaim
        More density claims, each invariant or not (:class:`MeasureClaim`).
    expected : Expectation, optional
        Claims about the Chaplygin reduction (basic invariant measure, phi-simplicity); without
        it the symbolic tests of a Chaplygin system report what they find, with no verdict.
    density_variables : sequence of sympy.Symbol, optional
        States a density found by discovery may depend on (default: those of ``density``,
        else the shape variables of a Chaplygin system, else the first half of the states).
    chart_t : float
        Final time of the Hamiltonisation runs in the Chaplygin chart.
    description : mapping of str to object
        Figures describing the system, for the report.
    """

    system: Any
    params: Mapping[str, float] | Sequence[float] | None = None
    sampler: Sampler | None = None
    t_end: float = 10.0
    title: str | None = None
    energy: str | None = None
    observables: Mapping[str, Any] = field(default_factory=dict)
    integrals: Mapping[str, str] = field(default_factory=dict)
    constraints: Mapping[str, float] = field(default_factory=dict)
    density: Any = None
    source: str = "the user's claim"
    density_label: str | None = None
    measure_claims: Sequence[MeasureClaim] = ()
    expected: Expectation | None = None
    density_variables: Sequence[sp.Symbol] | None = None
    chart_t: float = 1.0
    description: Mapping[str, Any] = field(default_factory=dict)


def to_instance(
    obj: Any, name: str = "system", params: Mapping[str, float] | None = None
) -> Instance:
    """The :class:`Instance` of a factory's return value (see the module docstring).

    Parameters
    ----------
    obj : SystemSpec, Instance or a system
        A system: as ``SystemSpec.system``.
    name : str
        Name in the report (``nhfast run`` gives ``FILE.py:FACTORY``).
    params : mapping of str to float, optional
        Parameter values that add to or override ``SystemSpec.params``.

    Returns
    -------
    Instance

    Raises
    ------
    SystemSpecError
        For a value of another type, parameters without values, unknown observable names, a
        density in unknown symbols, or a sampler that does not give ``(lanes, n_state)``
        finite states.
    """
    if isinstance(obj, Instance):
        return obj
    spec = obj if isinstance(obj, SystemSpec) else SystemSpec(system=obj)
    vf, chaplygin, shape = _vector_field(spec.system)
    if spec.observables:
        if isinstance(vf, StructuredVectorField):
            raise SystemSpecError(
                "observables: a StructuredVectorField has its observables in its program; "
                "give a VectorField to add SymPy observables"
            )
        vf = dataclasses.replace(vf, observables={**(vf.observables or {}), **spec.observables})
    names = _observable_names(vf)
    states = {str(s): s for s in vf.states}
    named = [*spec.integrals, *spec.constraints]
    as_observables = {k: states[k] for k in named if k not in names and k in states}
    if as_observables and not isinstance(vf, StructuredVectorField):
        # a state named as a first integral or constraint is observed as itself
        vf = dataclasses.replace(vf, observables={**(vf.observables or {}), **as_observables})
        names = _observable_names(vf)
    energy = spec.energy if spec.energy is not None else "energy"
    if spec.energy is not None and energy not in names:
        raise SystemSpecError(_unknown("energy", energy, names))
    for what, keys in (("integrals", spec.integrals), ("constraints", spec.constraints)):
        for key in keys:
            if key not in names:
                raise SystemSpecError(_unknown(what, key, names))
    values = _param_values(vf, spec.params, params)
    claims = list(spec.measure_claims)
    log_density = None
    variables = list(spec.density_variables) if spec.density_variables is not None else None
    if spec.density is not None:
        rho = _density(vf, spec.density)
        log_density = sp.log(rho)
        label = spec.density_label or ("Lebesgue" if rho == 1 else str(rho))
        claims.insert(0, MeasureClaim(rho, True, label, spec.source))
        if variables is None:
            variables = [s for s in vf.states if s in rho.free_symbols] or None
    if variables is None and shape:
        variables = list(vf.states[: len(shape)])
    structured = isinstance(vf, StructuredVectorField)
    sampler = _checked_sampler(spec.sampler or normal_sampler(vf.n_state), vf.n_state)
    return Instance(
        name=name,
        title=spec.title or name,
        vector_field=vf,
        params=values,
        sampler=sampler,
        energy=energy if energy in names else "",
        constraints=dict(spec.constraints),
        log_density=log_density,
        chaplygin=chaplygin,
        expected=spec.expected,
        t_end=float(spec.t_end),
        measure_claims=claims,
        chart_sampler=sampler if chaplygin is not None else None,
        chart_t=float(spec.chart_t),
        density_variables=variables,
        description={
            "state dimension": vf.n_state,
            "states": ", ".join(map(str, vf.states)),
            "parameters": {str(p): float(v) for p, v in zip(vf.params, values, strict=True)}
            or "none",
            **dict(spec.description),
        },
        form=STRUCTURED if structured else SYMBOLIC,
        liouville=liouville_field(vf) if structured and _has_divergence(vf) else None,
        integrals=dict(spec.integrals),
    )


def _vector_field(system: Any) -> tuple[VectorField, Any, list[sp.Symbol]]:
    """(the field that is integrated, the Chaplygin system or None, its shape symbols)."""
    if isinstance(system, VectorField):
        return system, None, []
    if isinstance(system, (ChaplyginSystem, ReducedChaplyginSystem)):
        vf = chaplygin_equations(system).as_vector_field()
        shape = getattr(system, "s", None)
        return vf, system, list(shape if shape is not None else system.shape)
    if isinstance(system, NonholonomicSystem):
        return hamel_equations(system).as_vector_field(), None, []
    raise SystemSpecError(f"expected {ACCEPTED}, got {type(system).__name__}")


def _observable_names(vf: VectorField) -> list[str]:
    if isinstance(vf, StructuredVectorField):
        return list(vf.program.output_names.get("observables", ()))
    return list(vf.observables or {})


def _has_divergence(vf: StructuredVectorField) -> bool:
    return "divergence" in vf.program.outputs


def _unknown(what: str, key: str, names: list[str]) -> str:
    have = ", ".join(names) or "none"
    return f"{what}: the vector field has no observable {key!r}; its observables: {have}"


def _param_values(
    vf: VectorField,
    given: Mapping[str, float] | Sequence[float] | None,
    extra: Mapping[str, float] | None,
) -> np.ndarray:
    """Parameter values in the order of ``vf.params``, from a mapping or a sequence."""
    names = [str(p) for p in vf.params]
    if given is None:
        values: dict[str, float] = {}
    elif isinstance(given, Mapping):
        values = dict(given)
    else:
        seq = list(np.asarray(given, dtype=float).ravel())
        if len(seq) != len(names):
            raise SystemSpecError(
                f"params: expected {len(names)} values ({', '.join(names) or 'none'}), "
                f"got {len(seq)}"
            )
        values = dict(zip(names, seq, strict=True))
    values.update(extra or {})
    unknown = sorted(set(values) - set(names))
    if unknown:
        raise SystemSpecError(
            f"params: unknown {', '.join(unknown)}; the parameters are {', '.join(names) or 'none'}"
        )
    missing = [p for p in names if p not in values]
    if missing:
        raise SystemSpecError(
            f"params: no value for {', '.join(missing)}; give SystemSpec(params={{...}}) or "
            "--param NAME=VALUE"
        )
    try:
        out = np.array([float(values[p]) for p in names], dtype=float)
    except (TypeError, ValueError) as exc:
        raise SystemSpecError(f"params: expected numbers, got {values!r} ({exc})") from None
    if not np.all(np.isfinite(out)):
        raise SystemSpecError(
            f"params: expected finite numbers, got {dict(zip(names, out, strict=True))}"
        )
    return out


def _density(vf: VectorField, density: Any) -> sp.Expr:
    try:
        rho = sp.sympify(density)
    except (sp.SympifyError, TypeError) as exc:
        raise SystemSpecError(f"density: expected a SymPy expression, got {density!r}") from exc
    known = {*vf.states, *vf.params}
    unknown = rho.free_symbols - known
    if unknown:
        raise SystemSpecError(
            f"density: uses {', '.join(sorted(map(str, unknown)))}, which are neither states "
            f"({', '.join(map(str, vf.states))}) nor parameters of the vector field"
        )
    return rho


def _checked_sampler(sampler: Callable[..., Any], n_state: int) -> Sampler:
    """``sampler`` after one trial draw of two states (shape and finiteness)."""
    if not callable(sampler):
        raise SystemSpecError(f"sampler: expected a callable (rng, lanes), got {sampler!r}")
    try:
        x = np.asarray(sampler(np.random.default_rng(0), 2), dtype=float)
    except Exception as exc:  # a user's function: any failure is a bad spec
        raise SystemSpecError(f"sampler: raised {type(exc).__name__}: {exc}") from exc
    if x.shape != (2, n_state):
        raise SystemSpecError(
            f"sampler: expected an array of shape (lanes, {n_state}) for (rng, lanes=2), "
            f"got shape {x.shape}"
        )
    if not np.all(np.isfinite(x)):
        raise SystemSpecError("sampler: gave states that are not finite")
    return sampler
