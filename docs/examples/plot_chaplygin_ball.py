"""
The invariant density of Chaplygin's ball
=========================================

Chaplygin's ball (a ball whose centre of mass is its geometric centre, with unequal principal
moments, rolling without slipping on a plane) has the invariant density

.. math:: \\rho = \\bigl(1 - m a^2 \\langle \\gamma, (I + m a^2)^{-1} \\gamma \\rangle\\bigr)^{-1/2}

with respect to ``dM dgamma`` (S. A. Chaplygin (1903), *On a ball's rolling on a horizontal
plane*; Borisov, A. V. & Mamaev, I. S. (2001), *Chaplygin's ball rolling problem is
Hamiltonian*, Math. Notes 70, the density of the equations ``M' = M x omega``,
``gamma' = gamma x omega``).

``check_measure`` integrates a batch with the Liouville integral ``ell(t)`` of the generated
divergence and reports the defect ``log rho(x(t)) + ell(t) - log rho(x(0))``: it stays at
round-off for ``rho``, while the Lebesgue measure (``rho = 1``, the control) fails by orders
of magnitude above the threshold.
"""

import matplotlib.pyplot as plt
import numpy as np

from nhfast.analysis import check_measure
from nhfast.systems import chaplygin_ball
from nhfast.systems.examples import chaplygin_ball_density

ball = chaplygin_ball()  # states (M1, M2, M3, gamma1, gamma2, gamma3)
rho = chaplygin_ball_density(ball)
params = [1.0, 2.0, 3.0, 1.0, 1.0]  # I1, I2, I3, m, a
rng = np.random.default_rng(0)
gamma = rng.normal(size=(32, 3))
gamma /= np.linalg.norm(gamma, axis=1, keepdims=True)
x0 = np.hstack([rng.normal(size=(32, 3)), gamma])

density = check_measure(ball, rho, x0, t=10.0, params=params)
control = check_measure(ball, None, x0, t=10.0, params=params)
print(density.statement)
print(control.statement)

# %%
# The largest defect over the batch against time, and the verdict's threshold
fig, ax = plt.subplots(figsize=(6.4, 4.0))
for chk, label in [(density, r"$\rho$ (Chaplygin)"), (control, "Lebesgue (control)")]:
    s = chk.series
    ax.semilogy(s["t"], np.maximum(s["max |defect|"], 1e-17), label=label)
ax.axhline(density.figures["threshold"], color="k", ls="--", lw=0.8, label="threshold")
ax.set(xlabel="t", ylabel="max |defect| over 32 trajectories")
ax.legend()
fig.tight_layout()
plt.show()
