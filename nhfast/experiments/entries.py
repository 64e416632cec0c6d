"""Catalogue entries of the example systems beyond the Chaplygin reductions of the catalogue's
first entries: the Chaplygin ball, the Suslov problem on SO(n), the two-wheeled carriage, the
unicycle and the Heisenberg system.

Each builder writes a :class:`~nhfast.experiments.spec.SystemSpec` -- the form a user's own
system takes -- with the claims of the sources, and builds it with
:func:`~nhfast.experiments.spec.to_instance`. The claims:

* Chaplygin ball: invariant density ``(1 - m a^2 <gamma, (I + m a^2)^-1 gamma>)^(-1/2)`` and
  first integrals ``<M, gamma>``, ``<M, M>``, ``|gamma|^2`` (Chaplygin 1903; Borisov & Mamaev
  2001, "Chaplygin's ball rolling problem is Hamiltonian"); Lebesgue measure is not invariant.
  Its Hamiltonisation (Borisov & Mamaev 2001, on ``<M, gamma> = 0``) needs a chart the package
  does not build, so those checks report what they need.
* Suslov problem on SO(n) with the constraint axis not an eigenvector of the inertia: no
  invariant measure (Fedorov & Kozlov 1995, "Various aspects of n-dimensional rigid body
  dynamics"); the Liouville volume shrinks along every trajectory.
* Two-wheeled carriage (Crampin & Mestdag 2010, Sec. 7.2, "Anholonomic frames in constrained
  dynamics"): the first integral ``Y alpha^2 + X omega^2`` of Jóźwikowski & Respondek (2019),
  (6.2) ("A comparison of vakonomic and nonholonomic dynamics with applications to
  non-invariant Chaplygin systems"); the basic invariant measure
  ``exp(-(m0 l R^3 / (2 (J R^2 + 2 J2 c^2))) (psi1 + psi2)) ds dp`` and phi-simplicity with the
  same exponent are derived here from the reduced equations (the divergence of (6.2) in the
  momenta is ``K (v1 + v2) / (P + Q)``), not stated in the papers.
* Unicycle: the vertical rolling disk of García-Naranjo & Marrero (2020), (3.7)-(3.8) ("The
  geometry of nonholonomic Chaplygin systems revisited"), so ``C = 0``: Lebesgue measure and
  ``phi = 0`` (their Sec. 3.1); with ``U = 0`` the momenta ``p_phi`` and ``p_theta`` are first
  integrals (Jóźwikowski & Respondek 2019, Ex. 6.1: ``(m R^2 + I) alphadot = 0``,
  ``J phiddot = 0``).
* Heisenberg system (Jóźwikowski & Respondek 2019, Ex. 6.3): the nonholonomic trajectories are
  straight lines in D, so the quasi-velocities are first integrals; the Hamel field has
  ``div X = 0``, so Lebesgue measure ``dq dv`` is invariant.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import sympy as sp

from nhfast.analysis.measure import kernel_values
from nhfast.experiments.instance import Expectation, Instance, MeasureClaim, Sampler
from nhfast.experiments.spec import SystemSpec, to_instance
from nhfast.systems import chaplygin_ball, two_wheeled_carriage, unicycle
from nhfast.systems.examples import chaplygin_ball_density
from nhfast.systems.heisenberg import heisenberg
from nhfast.systems.rigid_bodies import rigid_body_params, suslov_rigid_body
from nhfast.systems.wheeled import carriage_constants

__all__: list[str] = []

BALL = "Chaplygin (1903); Borisov & Mamaev (2001)"
SUSLOV = "Fedorov & Kozlov (1995): no invariant measure, axis not an eigenvector of the inertia"
CARRIAGE_INTEGRAL = "Jóźwikowski & Respondek (2019), (6.2): Y alpha^2 + X omega^2"
CARRIAGE_DERIVED = (
    "derived here from the reduced equations of Crampin & Mestdag (2010), Sec. 7.2 (not "
    "stated in the papers)"
)
DISK = "García-Naranjo & Marrero (2020), Sec. 3.1 (C = 0; the unicycle is their disk (3.7)-(3.8))"
UNICYCLE = "Jóźwikowski & Respondek (2019), Ex. 6.1 (U = 0)"
SIGMA_TEXT = "-(Y R / 2)(psi1 + psi2)"
HEISENBERG = "Jóźwikowski & Respondek (2019), Ex. 6.3: straight lines"


def _unit_rows(rng: np.random.Generator, lanes: int, n: int) -> np.ndarray:
    g = rng.normal(size=(lanes, n))
    return g / np.linalg.norm(g, axis=1, keepdims=True)


# ---------------------------------------------------------------------------------------------
# Chaplygin ball
# ---------------------------------------------------------------------------------------------


def _ball_sampler(rng: np.random.Generator, lanes: int) -> np.ndarray:
    """``M`` standard normal, ``gamma`` uniform on the unit sphere."""
    return np.hstack([rng.normal(size=(lanes, 3)), _unit_rows(rng, lanes, 3)])


def build_ball(_n: int | None = None) -> Instance:
    """The Chaplygin ball, ``I = (1, 2, 3)``, ``m = 1``, ``a = 1/2``."""
    vf = chaplygin_ball()
    rho = chaplygin_ball_density(vf)
    spec = SystemSpec(
        vf,
        params={"I1": 1.0, "I2": 2.0, "I3": 3.0, "m": 1.0, "a": 0.5},
        sampler=_ball_sampler,
        t_end=10.0,
        title="Chaplygin ball (I = (1, 2, 3), m = 1, a = 1/2)",
        constraints={"gamma2": 1.0},
        integrals={"M_gamma": BALL, "M2": BALL},
        density=rho,
        density_label="(1 - m a^2 <gamma, (I + m a^2)^-1 gamma>)^(-1/2)",
        source=BALL,
        measure_claims=[
            MeasureClaim(sp.Integer(1), False, "Lebesgue (control)", "div X != 0 (Chaplygin 1903)")
        ],
        density_variables=list(vf.states[3:]),
        description={
            "coordinates": "body frame (M, gamma): angular momentum about the contact point, "
            "normal of the plane",
            "initial states": "M standard normal, gamma uniform on the sphere",
            "Hamiltonisation": "Borisov & Mamaev (2001), on <M, gamma> = 0: not checked (no "
            "Chaplygin chart of the ball is built)",
        },
    )
    return to_instance(spec, name="ball")


# ---------------------------------------------------------------------------------------------
# Suslov problem on SO(n)
# ---------------------------------------------------------------------------------------------


def _suslov_sampler(n: int, vf: Any, params: np.ndarray) -> Sampler:
    """``gamma`` uniform on the sphere, ``m`` Gaussian orthogonal to the axis, energy 1/2."""
    axis = params[n:]
    k = list(vf.program.output_names["observables"]).index("energy")

    def sample(rng: np.random.Generator, lanes: int) -> np.ndarray:
        gamma = _unit_rows(rng, lanes, n)
        m = rng.normal(size=(lanes, n))
        m -= np.outer(m @ axis, axis)
        energy = kernel_values(vf, "observables", np.hstack([gamma, m]), params)[:, k]
        m *= np.sqrt(0.5 / energy)[:, None]
        return np.hstack([gamma, m])

    return sample


def build_suslov(n: int | None) -> Instance:
    """The Suslov problem on SO(n), physical inertia ``j_i = 1 + i/n``, axis ``e_n`` tilted
    towards ``e_1`` (not an eigenvector of the inertia)."""
    assert n is not None
    vf = suslov_rigid_body(n, "physical", axis=True)
    params = rigid_body_params(n, "physical", axis=True)
    spec = SystemSpec(
        vf,
        params=list(params),
        sampler=_suslov_sampler(n, vf, params),
        t_end=20.0,
        title=f"Suslov problem on SO({n}), tilted axis",
        constraints={"gamma_norm": 1.0, "momentum_constraint": 0.0},
        measure_claims=[MeasureClaim(sp.Integer(1), False, "Lebesgue (Liouville volume)", SUSLOV)],
        description={
            "n": n,
            "inertia": "J Om + Om J, j_i = 1 + i/n",
            "axis": "(e_n + e_1 / 2) / |e_n + e_1 / 2|, fixed in the body",
            "integrated form": "embedded (gamma, m), structured kernels",
            "initial states": "gamma uniform on the sphere, m Gaussian orthogonal to the axis, "
            "energy 1/2",
        },
    )
    return to_instance(spec, name="suslov")


# ---------------------------------------------------------------------------------------------
# two-wheeled carriage
# ---------------------------------------------------------------------------------------------

#: (m0, m1, l, J, J2, R, c): a physical carriage (m J > m0^2 l^2).
CARRIAGE_PARAMS = {"m0": 1.0, "m1": 0.5, "l": 0.3, "J": 1.5, "J2": 0.1, "R": 0.4, "c": 0.5}


def carriage_sigma(system: Any) -> sp.Expr:
    """``sigma = -(m0 l R^3 / (2 (J R^2 + 2 J2 c^2))) (psi1 + psi2)`` of the carriage's basic
    invariant measure (derived here; see the module docstring)."""
    names = {str(p): p for p in system.params}
    m0, l, J, J2, R, c = (names[k] for k in ("m0", "l", "J", "J2", "R", "c"))  # noqa: E741
    shape = getattr(system, "s", None)  # a ReducedChaplyginSystem, or the ChaplyginSystem
    psi1, psi2 = shape if shape is not None else system.shape
    return -m0 * l * R**3 / (2 * (J * R**2 + 2 * J2 * c**2)) * (psi1 + psi2)


def build_carriage(_n: int | None = None) -> Instance:
    """The two-wheeled carriage in its reduced chart ``(psi1, psi2, p1, p2)``."""
    system = two_wheeled_carriage()
    # G-invariance: the reduced data do not depend on the fibre point; fixing it avoids the
    # trigonometric simplification of SE(2)
    reduced = system.reduce(at=dict.fromkeys(system.group, 0))
    k = carriage_constants(system)
    p1, p2 = sp.symbols("p_psi1 p_psi2", real=True)
    # p = K v with K = [[P, -Q], [-Q, P]] (L_c = P (v1^2 + v2^2)/2 - Q v1 v2)
    det = k["P"] ** 2 - k["Q"] ** 2
    v1 = (k["P"] * p1 + k["Q"] * p2) / det
    v2 = (k["Q"] * p1 + k["P"] * p2) / det
    names = {str(p): p for p in system.params}
    R, c = names["R"], names["c"]
    alpha = -R / 2 * (v1 + v2)
    omega = R / (2 * c) * (v2 - v1)
    sigma = carriage_sigma(system)
    spec = SystemSpec(
        reduced,
        params=CARRIAGE_PARAMS,
        t_end=10.0,
        title="Two-wheeled carriage (m0 = 1, m1 = 1/2, l = 0.3, J = 1.5, J2 = 0.1, R = 0.4, "
        "c = 1/2)",
        observables={"Y_alpha2_X_omega2": k["Y"] * alpha**2 + k["X"] * omega**2},
        integrals={"Y_alpha2_X_omega2": CARRIAGE_INTEGRAL},
        density=sp.exp(sigma),
        density_label=f"exp({SIGMA_TEXT})",
        source=CARRIAGE_DERIVED,
        measure_claims=[
            MeasureClaim(
                sp.Integer(1), False, "Lebesgue ds dp (control)", "sigma above is not constant"
            )
        ],
        expected=Expectation(
            True,
            sigma,
            True,
            sigma,
            CARRIAGE_DERIVED,
            "-(Y R / 2)(psi1 + psi2)",
            "-(Y R / 2)(psi1 + psi2)",
        ),
        chart_t=2.0,
        description={
            "coordinates": "reduced chart (psi1, psi2, p_psi1, p_psi2) on T*T^2, SE(2) reduced",
            "initial states": "standard normal",
        },
    )
    return to_instance(spec, name="carriage")


# ---------------------------------------------------------------------------------------------
# unicycle
# ---------------------------------------------------------------------------------------------


def build_unicycle(_n: int | None = None) -> Instance:
    """The unicycle (``U = 0``) in its reduced chart ``(phi, theta, p_phi, p_theta)``."""
    system = unicycle()
    spec = SystemSpec(
        system,
        params={"m": 1.0, "R": 0.8, "I": 0.2, "J": 0.5},
        t_end=10.0,
        title="Unicycle (m = 1, R = 0.8, I = 0.2, J = 0.5, U = 0)",
        integrals={"p_phi": UNICYCLE, "p_theta": UNICYCLE},
        density=sp.Integer(1),
        source=DISK,
        expected=Expectation(True, sp.Integer(0), True, sp.Integer(0), DISK, "0", "0"),
        chart_t=2.0,
        description={
            "coordinates": "reduced chart (phi, theta, p_phi, p_theta), R^2 reduced",
            "initial states": "standard normal",
        },
    )
    return to_instance(spec, name="unicycle")


# ---------------------------------------------------------------------------------------------
# Heisenberg
# ---------------------------------------------------------------------------------------------


def build_heisenberg(_n: int | None = None) -> Instance:
    """The Heisenberg system in its Hamel form ``(x, y, z, v_1, v_2)``."""
    system = heisenberg()
    spec = SystemSpec(
        system,
        t_end=10.0,
        title="Heisenberg system, L = (alpha^2 + beta^2 + gamma^2)/2, D = ker(dz - y dx + x dy)",
        integrals={"v_1": HEISENBERG, "v_2": HEISENBERG},
        density=sp.Integer(1),
        source="div X = 0 (Hamel equations of Jóźwikowski & Respondek (2019), Ex. 6.3)",
        description={
            "coordinates": "Hamel form (x, y, z, v_1, v_2), frame e_1 = d_x + y d_z, "
            "e_2 = d_y - x d_z",
            "initial states": "standard normal",
        },
    )
    return to_instance(spec, name="heisenberg")
