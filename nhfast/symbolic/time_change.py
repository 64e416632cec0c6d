"""A phi-simple Chaplygin system as the ``tau``-system the Hamiltonised integrator runs.

Garcia-Naranjo and Marrero (2020), Theorem 3.21 and Corollary 3.22: after the time change
``dt = exp(-phi) dtau`` and ``ptilde = exp(phi) p`` the reduced equations are canonical with
``Htilde(s, ptilde) = H(s, exp(-phi) ptilde)``. :func:`time_changed_system` builds the vector
fields of that system (with ``t`` as one more state) for
:func:`nhfast.hamiltonised.integrate_hamiltonised`.

Reference: García-Naranjo & Marrero (2020), "The geometry of nonholonomic Chaplygin systems
revisited".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import sympy as sp

from nhfast._cache import memo
from nhfast.symbolic._util import as_expr, fresh_name, is_zero
from nhfast.symbolic.chaplygin import HamiltonisedSystem, hamiltonise, reduced_system
from nhfast.symbolic.systems import ChaplyginSystem, ReducedChaplyginSystem
from nhfast.vectorfield import VectorField

__all__ = ["TimeChangedSystem", "time_changed_system"]


@dataclass
class TimeChangedSystem:
    """A Hamiltonised Chaplygin system ready for integration in ``tau``.

    Attributes
    ----------
    hamiltonised : nhfast.symbolic.chaplygin.HamiltonisedSystem
        ``(s, ptilde)``, ``Htilde``, ``phi`` and the ``tau``-equations.
    rank : int
        ``r``, the dimension of the shape space.
    tau_field : VectorField
        States ``(s, ptilde, t)``: the canonical ``tau``-equations and ``dt/dtau = exp(-phi)``;
        observables ``energy`` (``Htilde``) and ``phi``.
    step_field : VectorField
        ``tau_field`` with its right-hand side multiplied by one more parameter ``dtau`` (last):
        one Gauss step of size 1 of ``step_field`` is one Gauss step of size ``dtau`` of
        ``tau_field`` (Runge-Kutta schemes commute with this rescaling).
    name : str
    domain_field : VectorField or None
        The ``tau``-system carrying the chart's domain (checked on initial states only).
    obs_index : dict
        Observable name (``energy``, ``phi``) -> its column in ``tau_field``'s observables.
    """

    hamiltonised: Any
    rank: int
    tau_field: VectorField
    step_field: VectorField
    name: str = "hamiltonised"
    domain_field: VectorField | None = None
    obs_index: dict = field(default_factory=dict, repr=False)

    @property
    def n_params(self) -> int:
        """Number of parameters of the system (not counting ``dtau``)."""
        return self.tau_field.n_params

    def phi(self, s: np.ndarray, params: np.ndarray) -> np.ndarray:
        """``phi(s)`` for rows ``s`` of shape ``(m, r)``; ``params`` of shape ``(m, n_params)``."""
        s = np.asarray(s, dtype=float)
        z = np.zeros((s.shape[0], self.tau_field.n_state))
        z[:, : self.rank] = s
        obs = self.tau_field.evaluate("observables", z, params=params)
        return obs[:, self.obs_index["phi"]]

    def hamiltonian(self, z: np.ndarray, params: np.ndarray) -> np.ndarray:
        """``Htilde`` at rows ``z = (s, ptilde, t)``."""
        obs = self.tau_field.evaluate("observables", z, params=params)
        return obs[:, self.obs_index["energy"]]

    def to_tilde(self, x: np.ndarray, params: np.ndarray) -> np.ndarray:
        """``(s, p) -> (s, ptilde = exp(phi) p)`` row-wise."""
        r = self.rank
        ph = self.phi(x[:, :r], params)
        return np.hstack([x[:, :r], np.exp(ph)[:, None] * x[:, r : 2 * r]])

    def from_tilde(self, z: np.ndarray, params: np.ndarray) -> np.ndarray:
        """``(s, ptilde) -> (s, p = exp(-phi) ptilde)`` row-wise (extra columns ignored)."""
        r = self.rank
        ph = self.phi(z[:, :r], params)
        return np.hstack([z[:, :r], np.exp(-ph)[:, None] * z[:, r : 2 * r]])


def time_changed_system(system: Any, phi: Any = None) -> TimeChangedSystem:
    """The ``tau``-system of a phi-simple Chaplygin system (built once per system object).

    Parameters
    ----------
    system : ChaplyginSystem, ReducedChaplyginSystem, HamiltonisedSystem or TimeChangedSystem
        A Chaplygin system is Hamiltonised with :func:`nhfast.symbolic.chaplygin.hamiltonise`
        (which finds ``phi`` with :func:`~nhfast.symbolic.chaplygin.phi_simple` unless
        ``phi`` is given).
    phi : sympy.Expr, optional
        ``phi(s)``; replaces the phi-simplicity search (the result is then not memoised).  It
        is verified (:func:`~nhfast.symbolic.chaplygin.verify_phi`): a ``ValueError`` naming the
        failing ``(i, j, k)`` is raised unless ``C^k_ij = delta^k_i d_j phi - delta^k_j d_i phi``.

    Returns
    -------
    TimeChangedSystem

    Raises
    ------
    TypeError
        If ``system`` is of another type.
    ValueError
        If the system is not phi-simple, or not with the given ``phi`` (the message gives the
        reason), or ``phi`` is given with an already Hamiltonised system and differs from its
        ``phi``.
    """
    if not isinstance(
        system, (TimeChangedSystem, HamiltonisedSystem, ChaplyginSystem, ReducedChaplyginSystem)
    ):
        raise TypeError(
            "system must be a ChaplyginSystem, ReducedChaplyginSystem or HamiltonisedSystem "
            f"for the measure-preserving (Hamiltonised) method, got {type(system).__name__}"
        )
    if phi is not None and isinstance(system, (TimeChangedSystem, HamiltonisedSystem)):
        # the system already carries its (verified) phi; a different one would be ignored
        own = system.hamiltonised.phi if isinstance(system, TimeChangedSystem) else system.phi
        if not is_zero(as_expr(phi, "phi") - own):
            raise ValueError(
                f"phi: a {type(system).__name__} is already Hamiltonised with phi = {own}; "
                f"pass the ChaplyginSystem to use phi = {phi}"
            )
        phi = None
    if isinstance(system, TimeChangedSystem):
        return system
    if phi is not None:
        return _build(system, phi)
    return memo(system, "time-changed system", lambda: _build(system, None))


def _build(system: Any, phi: Any) -> TimeChangedSystem:
    domain: dict = {}
    if isinstance(system, HamiltonisedSystem):
        ham = system
    else:
        red = reduced_system(system)
        domain = dict(red.extra.get("domain", {}))
        try:
            ham = hamiltonise(red, phi=phi, simplify=False)
        except ValueError as exc:
            if phi is not None:  # the message of verify_phi names phi, (i, j, k), the residual
                raise
            raise ValueError(
                "system: the measure-preserving method needs a phi-simple Chaplygin system "
                f"(Garcia-Naranjo and Marrero 2020, Definition 3.19): {exc}"
            ) from None
    taken = {str(x) for x in (*ham.q, *ham.p, *ham.params)}
    t_sym = sp.Symbol(fresh_name("t_phys", taken), real=True)
    dtau = sp.Symbol(fresh_name("dtau", taken), real=True)
    obs = {"energy": ham.hamiltonian, "phi": ham.phi}
    states = [*ham.q, *ham.p, t_sym]
    rhs = [*ham.rhs, ham.time_factor]
    common: dict[str, Any] = {"states": states, "params": list(ham.params)}
    if ham.solves:
        common["solves"] = list(ham.solves)
    name = str(getattr(system, "name", "")) or "system"
    return TimeChangedSystem(
        hamiltonised=ham,
        rank=len(ham.q),
        tau_field=VectorField(rhs=rhs, observables=obs, name="hamiltonised tau-flow", **common),
        step_field=VectorField(
            states=states,
            rhs=[dtau * e for e in rhs],
            params=[*ham.params, dtau],
            name="hamiltonised partial step",
            solves=common.get("solves", ()),
        ),
        name=getattr(system, "name", "") or "hamiltonised",
        # the chart's domain is checked on x0 only (the chunks of the run must not re-check it)
        domain_field=VectorField(rhs=rhs, name=name, domain=domain or None, **common),
        obs_index={k: i for i, k in enumerate(obs)},
    )
