"""What a run needs: the built system, its claims, and a catalogue entry.

:class:`Instance` is one system, built: the vector field that is integrated, parameter values,
initial-state samplers, the observables that must be conserved and the claims the checks of
:mod:`nhfast.experiments.checks` test (:class:`Expectation` for the Chaplygin reduction,
:class:`MeasureClaim` for densities along trajectories). :class:`Example` is a catalogue entry
that builds one. A user's own system reaches the same form through
:class:`nhfast.experiments.spec.SystemSpec`.

Reference: García-Naranjo & Marrero (2020), "The geometry of nonholonomic Chaplygin systems
revisited" (basic invariant measures, Thm 3.11; phi-simplicity, Def. 3.19).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import sympy as sp

from nhfast.analysis.measure import kernel_values
from nhfast.vectorfield import VectorField

__all__ = [
    "Expectation",
    "MeasureClaim",
    "Instance",
    "Example",
]

#: Values of :attr:`Instance.form`.
SYMBOLIC, STRUCTURED = "symbolic", "structured"

Sampler = Callable[[np.random.Generator, int], np.ndarray]


@dataclass(frozen=True)
class Expectation:
    """What a source claims about the reduced (Chaplygin) system.

    Attributes
    ----------
    basic_measure : bool
        Whether a basic invariant measure ``exp(sigma) ds dp`` exists (García-Naranjo & Marrero
        2020, Thm 3.11).
    sigma : sympy.Expr or None
        Its ``sigma`` (up to an additive constant), in the shape coordinates.
    phi_simple : bool
        Whether the system is phi-simple (ibid., Def. 3.19).
    phi : sympy.Expr or None
        Its ``phi`` (up to an additive constant).
    source : str
        Where the claim is made.
    sigma_text, phi_text : str
        ``sigma`` and ``phi`` written as in the source, for reports.
    """

    basic_measure: bool
    sigma: sp.Expr | None
    phi_simple: bool
    phi: sp.Expr | None
    source: str
    sigma_text: str = ""
    phi_text: str = ""


@dataclass(frozen=True)
class MeasureClaim:
    """A density on the integrated states and whether it is invariant, for numerical checks.

    Attributes
    ----------
    density : sympy.Expr or None
        ``rho`` (with respect to Lebesgue measure in the integrated states); ``1`` is the
        Liouville measure of the coordinates; None when only ``observable`` gives it.
    invariant : bool
        What the source says: ``rho dx`` is invariant (True) or not (False).
    label : str
        Short name, e.g. ``"(A gamma, gamma)^(-2)"``.
    source : str
        Why it is (not) invariant.
    observable : (str, float) or None
        For structured instances: ``log rho = factor * observable`` with the named observable of
        the vector field (its generated kernel); None: ``log rho`` is ``log(density)``, which
        must then be a constant.
    """

    density: sp.Expr | None
    invariant: bool
    label: str
    source: str
    observable: tuple[str, float] | None = None


@dataclass
class Instance:
    """One example, built: everything a run needs.

    Attributes
    ----------
    name : str
        Library name (``"veselova"``, ...).
    title : str
        Heading for reports, e.g. ``"Veselova rigid body on SO(6)"``.
    vector_field : VectorField
        The equations that are integrated.
    params : ndarray, shape (n_params,)
        Default parameter values, in the order of ``vector_field.params``.
    sampler : callable
        ``sampler(rng, lanes) -> x0`` of shape ``(lanes, n_state)``.
    energy : str
        Name of the energy observable.
    constraints : dict of str to float
        Observables that must keep a value (empty when the state space is the constraint
        manifold).
    log_density : sympy.Expr or None
        Log of an invariant density with respect to Lebesgue measure in the integrated
        states (from the sources), or None if they give none for these coordinates.
    chaplygin : object or None
        The ``ChaplyginSystem`` / ``ReducedChaplyginSystem`` whose measure and
        phi-simplicity the sources discuss.
    expected : Expectation or None
        The sources' claims about ``chaplygin``.
    t_end : float
        Default final time.
    measure_claims : list of MeasureClaim
        Densities to test numerically along trajectories, with the expected verdict.
    chart_sampler : callable or None
        ``sampler(rng, lanes)`` of states ``(s, p)`` of the Chaplygin chart
        (``chaplygin_equations(chaplygin)``), for the Hamiltonisation checks.
    chart_t : float
        Final time for runs in the chart (short where the chart is local).
    density_variables : list of sympy.Symbol or None
        States a *basic* density may depend on (the configuration part), for density
        discovery; None: the default of ``discover_density`` (the first half of the states).
    description : dict
        Figures describing the system for the report.
    form : str
        ``"symbolic"``: the checks are symbolic where they can be (Chaplygin reduction) and
        numerical on the unrolled field; ``"structured"``: only the structured field exists and
        every check runs in its structured numerical form.
    liouville : StructuredVectorField or None
        For structured fields with a ``divergence`` output: the field with Liouville's integral
        as one more (last) state. Its compiled library then serves every check (the drift run
        integrates it too), so a run compiles one library, not two.
    integrals : dict of str to str
        First integrals claimed besides the energy: observable name -> who claims it (e.g.
        ``{"M2": "Chaplygin (1903)"}``); each is checked along the drift run.
    """

    name: str
    title: str
    vector_field: VectorField
    params: np.ndarray
    sampler: Sampler
    energy: str = "energy"
    constraints: dict[str, float] = field(default_factory=dict)
    log_density: sp.Expr | None = None
    chaplygin: Any = None
    expected: Expectation | None = None
    t_end: float = 10.0
    measure_claims: list[MeasureClaim] = field(default_factory=list)
    chart_sampler: Sampler | None = None
    chart_t: float = 1.0
    density_variables: list[sp.Symbol] | None = None
    description: dict[str, Any] = field(default_factory=dict)
    form: str = SYMBOLIC
    liouville: Any = None
    integrals: dict[str, str] = field(default_factory=dict)

    def evaluate(
        self, kind: str, x: np.ndarray, params: Any = None, threads: int = 1
    ) -> np.ndarray:
        """A kernel family (``"rhs"``, ``"observables"``, ``"divergence"``) of the vector field
        at states ``x`` (..., n_state), through the library of :attr:`liouville` if any
        (:func:`nhfast.analysis.measure.kernel_values`).

        Parameters
        ----------
        kind : str
        x : ndarray, shape (..., n_state)
        params : array_like, optional
        threads : int

        Returns
        -------
        ndarray, shape (..., n_out)
        """
        return kernel_values(self.vector_field, kind, x, params, threads)

    def sample(self, lanes: int, seed: int | None = 0) -> np.ndarray:
        """Initial states ``(lanes, n_state)`` from ``numpy.random.default_rng(seed)``."""
        if not isinstance(lanes, int) or isinstance(lanes, bool) or lanes < 1:
            raise ValueError(f"lanes must be an int >= 1, got {lanes!r}")
        x0 = np.asarray(self.sampler(np.random.default_rng(seed), lanes), dtype=float)
        expect = (lanes, self.vector_field.n_state)
        if x0.shape != expect:  # a library bug, not bad input
            raise RuntimeError(f"sampler of {self.name!r} gave shape {x0.shape}, not {expect}")
        return x0


@dataclass(frozen=True)
class Example:
    """A library entry: a name, one line of explanation and a builder.

    Attributes
    ----------
    name : str
    summary : str
        One line for ``nhfast examples``.
    builder : callable
        ``builder(n) -> Instance`` (``n`` is None for examples without a size), or
        ``builder(n, inertia)`` for examples with ``inertias``.
    n_default : int or None
        Default size (``--n``) for sized examples, None otherwise.
    n_min : int
        Smallest allowed size.
    inertias : tuple of str
        Inertia operators the example accepts (``--inertia``; the first is the default),
        empty for examples without that option.
    """

    name: str
    summary: str
    builder: Callable[..., Instance]
    n_default: int | None = None
    n_min: int = 1
    inertias: tuple[str, ...] = ()

    def build(self, n: int | None = None, inertia: str | None = None) -> Instance:
        """Build the example; ``n`` only for sized examples (default ``n_default``),
        ``inertia`` only for examples with ``inertias`` (default the first)."""
        if inertia is not None and inertia not in self.inertias:
            if not self.inertias:
                raise ValueError(f"inertia: example {self.name!r} has no inertia option")
            raise ValueError(
                f"inertia: example {self.name!r} accepts {', '.join(self.inertias)}, "
                f"got {inertia!r}"
            )
        extra = (inertia or self.inertias[0],) if self.inertias else ()
        if self.n_default is None:
            if n is not None:
                raise ValueError(f"n: example {self.name!r} has no size parameter, got n={n!r}")
            return self.builder(None, *extra)
        if n is None:
            n = self.n_default
        if not isinstance(n, int) or isinstance(n, bool) or n < self.n_min:
            raise ValueError(f"n: example {self.name!r} needs an int n >= {self.n_min}, got {n!r}")
        return self.builder(n, *extra)


def param_vector(vf: VectorField, values: Mapping[str, float]) -> np.ndarray:
    names = [str(p) for p in vf.params]
    missing = [p for p in names if p not in values]
    if missing:  # a library bug
        raise RuntimeError(f"no default value for parameters {missing} of {vf.name!r}")
    return np.array([float(values[p]) for p in names], dtype=float)


def normal_sampler(n_state: int, fixed: Mapping[int, float] | None = None) -> Sampler:
    def sample(rng: np.random.Generator, lanes: int) -> np.ndarray:
        x0 = rng.normal(size=(lanes, n_state))
        for k, v in (fixed or {}).items():
            x0[:, k] = v
        return x0

    return sample


def reduced_chart(vf: Any, coordinates: str, parameters: Any) -> dict[str, Any]:
    """The :class:`Instance` fields of a system integrated in its reduced chart itself (two shape
    variables): standard normal states for every run, chart runs to ``t = 2``, the density in
    the shape variables."""
    return {
        "sampler": normal_sampler(vf.n_state),
        "chart_sampler": normal_sampler(vf.n_state),
        "chart_t": 2.0,
        "density_variables": list(vf.states[:2]),
        "description": {
            "coordinates": coordinates,
            "state dimension": vf.n_state,
            "parameters": parameters,
            "initial states": "standard normal",
        },
    }
