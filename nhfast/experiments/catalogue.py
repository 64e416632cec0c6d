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

The Chaplygin ball, the Suslov problem on SO(n), the two-wheeled carriage, the unicycle and the
Heisenberg system are built in :mod:`nhfast.experiments.entries`, with the claims of Chaplygin
(1903), Borisov & Mamaev (2001), Fedorov & Kozlov (1995), Crampin & Mestdag (2010), "Anholonomic
frames in constrained dynamics", and Jóźwikowski & Respondek (2019), "A comparison of vakonomic
and nonholonomic dynamics with applications to non-invariant Chaplygin systems".

The Veselova example has an inertia option (``"a-omega-a"``, ``"physical"``, ``"pairwise"``).
The ``A Om A`` inertia up to ``n = STRUCTURED_N`` builds the unrolled SymPy field and the
Chaplygin chart system, so that its checks can be symbolic; above that size, and for the other
inertias at every size, the instance holds only the structured field (C kernels of an indexed
program) and its checks run in their structured numerical form (``Instance.form``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import sympy as sp

from nhfast.analysis.measure import kernel_values, liouville_field
from nhfast.experiments import entries
from nhfast.experiments.instance import (
    STRUCTURED,
    SYMBOLIC,  # noqa: F401
    Example,
    Expectation,
    Instance,
    MeasureClaim,
    Sampler,
    normal_sampler,
    param_vector,
    reduced_chart,
)
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
        params=param_vector(vf, {"a": a_value}),
        log_density=log_rho,
        chaplygin=system,
        expected=expected,
        t_end=10.0,
        measure_claims=claims,
        **reduced_chart(vf, "reduced chart (x, y, p_x, p_y) on T*R^2", {"a": a_value}),
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
        params=param_vector(vf, values),
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
        **reduced_chart(vf, "reduced chart (phi, theta, p_phi, p_theta)", values),
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
        params=param_vector(vf, values),
        sampler=normal_sampler(vf.n_state, fixed={0: 0.0, 1: 0.0}),
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
        Example(
            "ball",
            "Chaplygin ball: density (1 - m a^2 <gamma, (I + m a^2)^-1 gamma>)^(-1/2), "
            "integrals <M, gamma>, <M, M>, |gamma|^2 (Chaplygin 1903)",
            entries.build_ball,
        ),
        Example(
            "suslov",
            "Suslov problem on SO(n) (--n, default 3), axis not an eigenvector of the inertia: "
            "no invariant measure (Liouville volume not preserved), energy conserved",
            entries.build_suslov,
            n_default=3,
            n_min=3,
        ),
        Example(
            "carriage",
            "two-wheeled carriage: integral Y alpha^2 + X omega^2 (Jóźwikowski & Respondek "
            "2019); basic measure exp(sigma), phi-simple (derived here)",
            entries.build_carriage,
        ),
        Example(
            "unicycle",
            "unicycle, U = 0: C = 0, Lebesgue measure, phi = 0; integrals p_phi, p_theta",
            entries.build_unicycle,
        ),
        Example(
            "heisenberg",
            "Heisenberg system: straight lines (integrals v_1, v_2), Lebesgue dq dv invariant",
            entries.build_heisenberg,
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
