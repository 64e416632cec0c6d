"""The examples of ``nhfast run`` / ``nhfast check``: systems, parameters, samplers, claims.

Each :class:`Example` builds an :class:`Instance`: the vector field that is integrated, default
parameters, a sampler of initial states, the energy and constraint observables, and what the
sources claim about an invariant measure and Hamiltonisation (:class:`Expectation`,
:class:`MeasureClaim`), which :mod:`nhfast.experiments.checks` tests. Claims are those of
García-Naranjo & Marrero (2020), "The geometry of nonholonomic Chaplygin systems revisited": the
Veselova body on SO(n) (Thm. 4.3), the nonholonomic particle (Sec. 4.1), the vertical disk
(Sec. 3.1); the sleigh's ``d Theta != 0`` is computed. For the Veselova body with an inertia
other than ``A Om A`` the claimed density ``det(K_gamma)^(-1/2)`` is derived here from the
paper's Sec. 4.2; the paper does not state it.

The Veselova example has an inertia option (``"a-omega-a"``, ``"physical"``, ``"pairwise"``).
The ``A Om A`` inertia up to ``n = STRUCTURED_N`` builds the unrolled SymPy field and the
Chaplygin chart system, so that its checks can be symbolic; above that size, and for the other
inertias at every size, the instance holds only the structured field (C kernels of an indexed
program) and its checks run in their structured numerical form (``Instance.form``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import sympy as sp

from nhfast.analysis.measure import kernel_values, liouville_field
from nhfast.symbolic import almost_poisson_equations, chaplygin_equations
from nhfast.systems import (
    chaplygin_sleigh,
    nonholonomic_particle,
    vertical_rolling_disk,
    veselova,
)
from nhfast.systems.inertia import INERTIAS as _NAMED_INERTIAS
from nhfast.systems.inertia import named_inertia
from nhfast.systems.rigid_bodies import rigid_body_params
from nhfast.systems.veselova_body import default_inertia, embedded_to_chart
from nhfast.systems.veselova_body.formulas import (
    density_exponent,
    inertia_quadratic,
    log_density,
    phi,
)
from nhfast.vectorfield import VectorField

__all__ = [
    "Instance",
    "Example",
    "get_example",
    "build_example",
]

#: Inertia operators of the Veselova example (``--inertia``); the first is the default.
INERTIAS = tuple(_NAMED_INERTIAS)
#: Largest ``n`` at which the ``A Om A`` Veselova example is built symbolically (the chart
#: system of ``veselova(n)`` costs minutes from ``n`` of about 10 on).
STRUCTURED_N = 6
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


def _param_vector(vf: VectorField, values: Mapping[str, float]) -> np.ndarray:
    names = [str(p) for p in vf.params]
    missing = [p for p in names if p not in values]
    if missing:  # a library bug
        raise RuntimeError(f"no default value for parameters {missing} of {vf.name!r}")
    return np.array([float(values[p]) for p in names], dtype=float)


# ---------------------------------------------------------------------------------------------
# Veselova
# ---------------------------------------------------------------------------------------------


def _momentum_at_energy(rng: np.random.Generator, gamma: np.ndarray, a: np.ndarray) -> np.ndarray:
    """``m`` Gaussian in ``gamma^perp``, scaled to energy ``(m, A^{-1} m)/(2 c) = 1/2``."""
    w = rng.normal(size=gamma.shape)
    m = w - np.sum(gamma * w, axis=1, keepdims=True) * gamma
    c = np.sum(a * gamma**2, axis=1)
    energy = np.sum(m * m / a, axis=1) / (2 * c)
    m *= np.sqrt(0.5 / energy)[:, None]
    return m


def _veselova_sampler(n: int, a: np.ndarray) -> Sampler:
    def sample(rng: np.random.Generator, lanes: int) -> np.ndarray:
        # gamma uniform on S^{n-1}
        gamma = rng.normal(size=(lanes, n))
        gamma /= np.linalg.norm(gamma, axis=1, keepdims=True)
        return np.hstack([gamma, _momentum_at_energy(rng, gamma, a)])

    return sample


def _veselova_chart_sampler(n: int, a: np.ndarray, radius: float = 0.4) -> Sampler:
    def sample(rng: np.random.Generator, lanes: int) -> np.ndarray:
        # s uniform in the ball |s| < radius (well inside the hemisphere chart)
        d = rng.normal(size=(lanes, n - 1))
        d /= np.linalg.norm(d, axis=1, keepdims=True)
        s = d * radius * rng.uniform(size=(lanes, 1)) ** (1.0 / (n - 1))
        gamma = np.hstack([s, np.sqrt(1.0 - np.sum(s**2, axis=1, keepdims=True))])
        s_, p_ = embedded_to_chart(gamma, _momentum_at_energy(rng, gamma, a))
        return np.hstack([s_, p_])

    return sample


#: The inertia operators of the Veselova example, for reports.
INERTIA_TEXT = {
    name: f"{spec.formula}, {values}"
    for name, spec in _NAMED_INERTIAS.items()
    for values in [
        {
            "a-omega-a": "a_i = 1 + i/n (the inertia of García-Naranjo & Marrero (2020), (4.5))",
            "physical": "j_i = 1 + i/n",
            "pairwise": "H_ij = j_i + j_j, j_i = 1 + i/n (dense solve)",
        }[name]
    ]
}


def _observable_index(vf: Any, name: str) -> int:
    """Position of a named observable of a structured field (without unrolling it)."""
    return list(vf.program.output_names["observables"]).index(name)


def _structured_sampler(n: int, vf: Any, params: np.ndarray, inertia: str) -> Sampler:
    """gamma uniform on the sphere, m Gaussian in gamma^perp scaled to energy 1/2 (the energy
    from the field's observable kernel: quadratic in m without a potential)."""
    if inertia == "a-omega-a":
        return _veselova_sampler(n, params)  # the same draws as the unrolled example
    k = _observable_index(vf, "energy")

    def sample(rng: np.random.Generator, lanes: int) -> np.ndarray:
        gamma = rng.normal(size=(lanes, n))
        gamma /= np.linalg.norm(gamma, axis=1, keepdims=True)
        w = rng.normal(size=gamma.shape)
        m = w - np.sum(gamma * w, axis=1, keepdims=True) * gamma
        x = np.hstack([gamma, m])
        energy = kernel_values(vf, "observables", x, params)[:, k]
        m *= np.sqrt(0.5 / energy)[:, None]
        return np.hstack([gamma, m])

    return sample


def _build_veselova(n: int | None, inertia: str = "a-omega-a") -> Instance:
    assert n is not None
    inertia = named_inertia(inertia).name
    if inertia != "a-omega-a" or n > STRUCTURED_N:
        return _build_veselova_structured(n, inertia)
    vf = veselova(n, form="embedded")
    a = default_inertia(n)
    red = veselova(n)
    c = red.extra["c"]
    gam = vf.states[:n]
    c_emb = inertia_quadratic(list(vf.params), gam)
    exponent = density_exponent(n)
    return Instance(
        name="veselova",
        title=f"Veselova rigid body on SO({n})",
        vector_field=vf,
        params=a,
        sampler=_veselova_sampler(n, a),
        energy="energy",
        constraints={"gamma_norm": 1.0, "momentum_constraint": 0.0},
        log_density=log_density(n, c_emb),
        chaplygin=red,
        expected=Expectation(
            basic_measure=True,
            sigma=log_density(n, c),
            phi_simple=True,
            phi=phi(c),
            source="García-Naranjo & Marrero (2020), Thm. 4.3",
            sigma_text=f"{exponent} ln (A gamma, gamma)",
            phi_text="-1/2 ln (A gamma, gamma)",
        ),
        t_end=10.0,
        measure_claims=[
            MeasureClaim(
                c_emb**exponent,
                True,
                f"(A gamma, gamma)^({exponent})",
                "García-Naranjo & Marrero (2020), Thm. 4.3",
            ),
            MeasureClaim(
                sp.Integer(1),
                False,
                "Lebesgue (control)",
                "the invariant density above is not constant",
            ),
        ],
        # speed <= ~1 at energy 1/2: from |s| < 0.4, |s| stays below 0.8 for tau, t <= 0.4
        chart_sampler=_veselova_chart_sampler(n, a),
        chart_t=0.4,
        density_variables=list(gam),
        description={
            "n": n,
            "shape space": f"S^{n - 1} (rank r = {n - 1})",
            "integrated form": "embedded (gamma, m) in R^2n, whole sphere",
            "state dimension": vf.n_state,
            "parameters": {f"a{i + 1}": float(v) for i, v in enumerate(a)},
            "initial states": "gamma uniform on the sphere, m Gaussian in gamma^perp, energy 1/2",
            "inertia": INERTIA_TEXT["a-omega-a"],
            "checks": "symbolic (Chaplygin reduction) and numerical (unrolled kernels)",
        },
    )


def _build_veselova_structured(n: int, inertia: str) -> Instance:
    """The Veselova example as a structured field only (no unrolled SymPy, no chart system)."""
    exponent = density_exponent(n)
    vf: Any = veselova(n, form="structured", inertia=inertia)
    if inertia == "a-omega-a":
        params = default_inertia(n)
        log_rho = ("log_density", 1.0)
        label = f"(A gamma, gamma)^({exponent})"
        gam = vf.program.state_symbols[:n]
        density: sp.Expr | None = (
            inertia_quadratic(list(vf.program.param_symbols), list(gam)) ** exponent
        )
        expected = Expectation(
            basic_measure=True,
            sigma=None,
            phi_simple=True,
            phi=None,
            source="García-Naranjo & Marrero (2020), Thm. 4.3",
            sigma_text=f"{exponent} ln (A gamma, gamma)",
            phi_text="-1/2 ln (A gamma, gamma)",
        )
    else:
        params = rigid_body_params(n, inertia)
        log_rho = ("log_det_metric", -0.5)
        label = "det(K_gamma)^(-1/2)"
        density = None
        expected = Expectation(
            basic_measure=True,
            sigma=None,
            # phi-simple only where the inertia is of the paper's form A Om A (n = 3)
            phi_simple=n == 3,
            phi=None,
            # derived here (checklist O18), not claimed by the paper; det K_gamma is the reduced
            # metric on gamma^perp, the chart-free form of det K gamma_n^2
            source=(
                "a result derived here from García-Naranjo & Marrero (2020), Sec. 4.2, for any "
                "inertia (not stated in the paper)"
            ),
            sigma_text="-1/2 ln det K_gamma",
        )
    source = expected.source
    liouville = liouville_field(vf) if "divergence" in vf.program.outputs else None
    return Instance(
        name="veselova",
        title=f"Veselova rigid body on SO({n}), {inertia} inertia",
        vector_field=vf,
        params=params,
        sampler=_structured_sampler(n, vf, params, inertia),
        energy="energy",
        constraints={"gamma_norm": 1.0, "momentum_constraint": 0.0},
        expected=expected,
        t_end=10.0,
        measure_claims=[
            MeasureClaim(density, True, label, source, observable=log_rho),
            MeasureClaim(
                sp.Integer(1),
                False,
                "Lebesgue (control)",
                "the invariant density above is not constant",
            ),
        ],
        description={
            "n": n,
            "inertia": INERTIA_TEXT[inertia],
            "shape space": f"S^{n - 1} (rank r = {n - 1})",
            "integrated form": (
                f"embedded (gamma, m) in R^2n, whole sphere; veselova(n, form='structured', "
                f"inertia={inertia!r}): the rigid-body engine's equations, looped kernels"
            ),
            "state dimension": vf.n_state,
            "parameters": f"{len(params)} values ({INERTIA_TEXT[inertia].split(', ', 1)[1]})",
            "initial states": "gamma uniform on the sphere, m Gaussian in gamma^perp, energy 1/2",
            "checks": (
                "structured numeric (C kernels of the indexed program; "
                + (
                    f"the symbolic checks run only for n <= {STRUCTURED_N})"
                    if inertia == "a-omega-a"
                    else "no symbolic form exists for this inertia)"
                )
            ),
        },
        form=STRUCTURED,
        liouville=liouville,
    )


# ---------------------------------------------------------------------------------------------
# Nonholonomic particle, vertical disk, sleigh
# ---------------------------------------------------------------------------------------------


def _normal_sampler(n_state: int, fixed: Mapping[int, float] | None = None) -> Sampler:
    def sample(rng: np.random.Generator, lanes: int) -> np.ndarray:
        x0 = rng.normal(size=(lanes, n_state))
        for k, v in (fixed or {}).items():
            x0[:, k] = v
        return x0

    return sample


def _reduced_chart(vf: Any, coordinates: str, parameters: Any) -> dict[str, Any]:
    """The :class:`Instance` fields of a system integrated in its reduced chart itself (two shape
    variables): standard normal states for every run, chart runs to ``t = 2``, the density in
    the shape variables."""
    return {
        "sampler": _normal_sampler(vf.n_state),
        "chart_sampler": _normal_sampler(vf.n_state),
        "chart_t": 2.0,
        "density_variables": list(vf.states[:2]),
        "description": {
            "coordinates": coordinates,
            "state dimension": vf.n_state,
            "parameters": parameters,
            "initial states": "standard normal",
        },
    }


def _build_particle(a_value: float) -> Instance:
    def potential(x: sp.Symbol, y: sp.Symbol) -> sp.Expr:
        return (x**2 + y**2) / 2

    a_sym: Any = None if a_value != 0 else 0
    system = nonholonomic_particle(a=a_sym, potential=potential)
    vf = chaplygin_equations(system).as_vector_field()
    vf.name = "nonholonomic_particle"
    y = system.shape[1]
    sigma = -sp.log(1 + y**2) / 2
    lebesgue = "Lebesgue dx dy dp (basic, sigma = 0)"
    if a_value == 0:
        text = "-1/2 ln(1 + y^2)"
        expected = Expectation(
            True,
            sigma,
            True,
            sigma,
            "García-Naranjo & Marrero (2020), Sec. 4.1 (a = 0)",
            text,
            text,
        )
        log_rho: sp.Expr | None = sigma.subs(y, vf.states[1])
        claims = [
            MeasureClaim(
                sp.exp(log_rho),
                True,
                "(1 + y^2)^(-1/2)",
                "García-Naranjo & Marrero (2020), Sec. 4.1 (a = 0)",
            ),
            MeasureClaim(sp.Integer(1), False, lebesgue, "the density above is not constant"),
        ]
    else:
        expected = Expectation(
            False, None, False, None, "García-Naranjo & Marrero (2020), Sec. 4.1 (a != 0)"
        )
        log_rho = None
        claims = [
            MeasureClaim(
                sp.Integer(1),
                False,
                lebesgue,
                "García-Naranjo & Marrero (2020), Sec. 4.1: no basic measure, a != 0",
            )
        ]
    return Instance(
        name="particle" if a_value != 0 else "particle-a0",
        title=f"Nonholonomic particle, a = {a_value:g}, U = (x^2 + y^2)/2",
        vector_field=vf,
        params=_param_vector(vf, {"a": a_value}),
        log_density=log_rho,
        chaplygin=system,
        expected=expected,
        t_end=10.0,
        measure_claims=claims,
        **_reduced_chart(vf, "reduced chart (x, y, p_x, p_y) on T*R^2", {"a": a_value}),
    )


def _build_disk(_n: int | None) -> Instance:
    system = vertical_rolling_disk()
    vf = chaplygin_equations(system).as_vector_field()
    vf.name = "vertical_rolling_disk"
    values = {"m": 1.0, "R": 1.0, "I": 0.25, "J": 0.5}
    return Instance(
        name="disk",
        title="Vertical rolling disk (m = 1, R = 1, I = 1/4, J = 1/2)",
        vector_field=vf,
        params=_param_vector(vf, values),
        log_density=sp.Integer(0),
        chaplygin=system,
        expected=Expectation(
            True,
            sp.Integer(0),
            True,
            sp.Integer(0),
            "García-Naranjo & Marrero (2020), Sec. 3.1 (C = 0)",
            "0",
            "0",
        ),
        t_end=10.0,
        measure_claims=[
            MeasureClaim(
                sp.Integer(1),
                True,
                "Lebesgue ds dp",
                "García-Naranjo & Marrero (2020), Sec. 3.1: C = 0",
            )
        ],
        **_reduced_chart(vf, "reduced chart (phi, theta, p_phi, p_theta)", values),
    )


def _sleigh_chart_sampler(rng: np.random.Generator, lanes: int) -> np.ndarray:
    """States ``(y, theta, p_y, p_theta)`` of the chart ``sin(theta) != 0``, theta near pi/2."""
    x0 = rng.normal(scale=0.5, size=(lanes, 4))
    x0[:, 1] = rng.uniform(1.2, 1.9, size=lanes)
    return x0


def _build_sleigh(_n: int | None) -> Instance:
    # the global frame of D along the blade (the 1-form's frame is singular at theta = pi/2)
    system = chaplygin_sleigh(as_chaplygin=False, blade_frame=True)
    vf = almost_poisson_equations(system).as_vector_field()
    vf.name = "chaplygin_sleigh"
    values = {"m": 1.0, "I": 0.5, "b": 0.5}
    return Instance(
        name="sleigh",
        title="Chaplygin sleigh (m = 1, I = 1/2, b = 1/2)",
        vector_field=vf,
        params=_param_vector(vf, values),
        sampler=_normal_sampler(vf.n_state, fixed={0: 0.0, 1: 0.0}),
        chaplygin=chaplygin_sleigh(as_chaplygin=True),
        expected=Expectation(
            False, None, False, None, "nhfast.systems.examples (d Theta != 0 for b != 0)"
        ),
        t_end=10.0,
        measure_claims=[
            MeasureClaim(
                sp.Integer(1),
                False,
                "Lebesgue dq dp on D*",
                "div X = -b p_1/(I + m b^2) != 0 (computed from the equations)",
            )
        ],
        chart_sampler=_sleigh_chart_sampler,
        chart_t=0.5,
        density_variables=list(vf.states[:3]),
        description={
            "coordinates": "almost-Poisson (x, y, theta, p_1, p_2) on D*, "
            "e_1 = cos(theta) d_x + sin(theta) d_y, e_2 = d_theta",
            "state dimension": vf.n_state,
            "parameters": values,
            "initial states": "x = y = 0, the rest standard normal",
        },
    )


EXAMPLES: dict[str, Example] = {
    e.name: e
    for e in [
        Example(
            "veselova",
            "Veselova rigid body on SO(n), a_i = 1 + i/n (--n, default 6): phi-simple, "
            "density (A gamma, gamma)^((2-n)/2); --inertia physical|pairwise: density "
            "det(K_gamma)^(-1/2), not phi-simple for n >= 4",
            _build_veselova,
            n_default=6,
            n_min=3,
            inertias=INERTIAS,
        ),
        Example(
            "particle",
            "nonholonomic particle, a = 1/2, U = (x^2+y^2)/2: no basic invariant measure",
            lambda _n: _build_particle(0.5),
        ),
        Example(
            "particle-a0",
            "nonholonomic particle, a = 0, U = (x^2+y^2)/2: phi = -ln(1+y^2)/2",
            lambda _n: _build_particle(0.0),
        ),
        Example(
            "disk",
            "vertical rolling disk: gyroscopic tensor zero, Hamiltonian after reduction",
            _build_disk,
        ),
        Example(
            "sleigh",
            "Chaplygin sleigh: d Theta != 0, no basic invariant measure",
            _build_sleigh,
        ),
    ]
}


def get_example(name: str) -> Example:
    """The library entry ``name``; ``KeyError`` listing the names when unknown.

    Parameters
    ----------
    name : str
        A name of the catalogue.

    Returns
    -------
    Example

    Raises
    ------
    KeyError
        If ``name`` is unknown (the message lists the names).
    """
    if name not in EXAMPLES:
        raise KeyError(f"example: unknown {name!r}; choose one of {', '.join(EXAMPLES)}")
    return EXAMPLES[name]


def build_example(name: str, n: int | None = None, inertia: str | None = None) -> Instance:
    """Shortcut for ``get_example(name).build(n, inertia)``.

    Parameters
    ----------
    name : str
        A name of the catalogue (``nhfast examples`` lists them).
    n : int, optional
        Size of sized examples (the Veselova body: ``SO(n)``); default the example's.
    inertia : str, optional
        Inertia operator of examples that have one; default the example's first.

    Returns
    -------
    Instance
    """
    return get_example(name).build(n, inertia)
