"""
The Hamiltonised flow is symplectic
===================================

García-Naranjo, L. C. & Marrero, J. C. (2020), *The geometry of nonholonomic Chaplygin systems
revisited*, Theorem 3.21 and Corollary 3.22: a phi-simple Chaplygin system becomes canonical
Hamiltonian after the time change ``dt = exp(-phi) dtau`` and ``ptilde = exp(phi) p``, with
``Htilde(s, ptilde) = H(s, exp(-phi) ptilde)``. The nonholonomic particle with ``a = 0`` of
their Section 4.1 (``zdot = y xdot``, here in the potential ``(x^2 + y^2)/2``) is phi-simple with
``phi = -1/2 ln(1 + y^2)``.

``hamiltonisation_report`` integrates the Hamiltonised system in ``tau`` with Gauss–Legendre
and checks it: ``Htilde`` is conserved, the flow map ``M`` of the ``tau``-flow satisfies
``M^T J M = J`` to round-off (the variational equations), the original ``t``-flow in
``(s, p)`` does not (the control), and the orbits agree with DOP853 on the original equations
after the time change.
"""

import matplotlib.pyplot as plt
import numpy as np

from nhfast.analysis import hamiltonisation_report
from nhfast.systems import nonholonomic_particle

particle = nonholonomic_particle(a=0, potential=lambda x, y: (x**2 + y**2) / 2)
rng = np.random.default_rng(0)
x0 = rng.uniform(-0.5, 0.5, size=(8, 4))  # (x, y, p_x, p_y)
report = hamiltonisation_report(particle, x0, t_final=10.0, h=0.02, n_out=51)
for check in report.checks:
    print(f"{check.name}:\n    {check.statement}")

# %%
# Symplecticity defect and energy error of the ``tau``-flow against ``tau``
symplectic = next(c for c in report.checks if "M^T J M" in c.name)
energy = next(c for c in report.checks if c.name.startswith("Htilde"))
fig, ax = plt.subplots(figsize=(6.4, 4.0))
ax.semilogy(
    symplectic.series["t"],
    np.maximum(symplectic.series["max |M^T J M - J|"], 1e-17),
    label=r"$\max |M^T J M - J|$ ($\tau$-flow)",
)
ax.semilogy(
    energy.series["t"],
    np.maximum(energy.series["max |dHtilde|"], 1e-17),
    label=r"$\max |\tilde H(\tau) - \tilde H(0)|$",
)
control = symplectic.figures["t-flow defect max |M^T J M - J| (control)"]
ax.axhline(control, color="k", ls="--", lw=0.8, label="t-flow in (s, p): final defect")
ax.set(xlabel=r"$\tau$", ylabel="defect", title="Nonholonomic particle, a = 0")
ax.legend(fontsize=8)
fig.tight_layout()
plt.show()
