"""
Suslov's problem: an invariant density singular on the equilibria
=================================================================

The Suslov problem (G. K. Suslov, *Theoretical Mechanics*, 1902): a rigid body whose body
angular velocity is constrained by ``Omega_3 = 0``. With the inertia tensor's off-diagonal
entries ``I13, I23`` its equations are

.. math::

    I_1 \\dot\\Omega_1 = -k\\,\\Omega_2, \\qquad I_2 \\dot\\Omega_2 = k\\,\\Omega_1, \\qquad
    k = I_{13}\\Omega_1 + I_{23}\\Omega_2 .

Every point of the line ``k = 0`` is an equilibrium, and the other motions run along the
energy ellipses from one half of that line to the other: no smooth invariant measure. Since
``X[log |k|] = div X``, the density ``rho = 1/|k|`` is invariant on each side of the line and
blows up on it (derived here from the equations; the identity is one line).
``discover_density`` finds it from samples of the vector field alone, and says where it is
singular; ``check_measure`` confirms it along trajectories, while the Lebesgue measure fails.
"""

import matplotlib.pyplot as plt
import numpy as np

import nhfast as nh
from nhfast.analysis import check_measure, discover_density
from nhfast.systems import suslov

vf = suslov().as_vector_field()  # states (Omega1, Omega2, Omega3), constraint Omega3 = 0
w1, w2, w3 = vf.states
par = [2.0, 3.0, 4.0, 0.3, -0.2]  # I1, I2, I3, I13, I23
rng = np.random.default_rng(0)
x0 = np.column_stack([rng.normal(size=(64, 2)), np.zeros(64)])
fit = discover_density(vf, samples=x0, params=par, variables=[w1, w2])
print(fit.statement)

k = par[3] * w1 + par[4] * w2
print(check_measure(vf, 1 / abs(k), x0[:16], t=5.0, params=par).statement)
print(check_measure(vf, None, x0[:16], t=5.0, params=par).statement)

# %%
# Trajectories on the energy ellipses, and the line ``k = 0`` of equilibria where the density
# blows up
t = np.linspace(0.0, 40.0, 801)
res = nh.integrate(vf, x0[:12], t, params=par, rtol=1e-10, atol=1e-12)
fig, ax = plt.subplots(figsize=(5.6, 5.0))
for lane in range(12):
    ax.plot(res.y[lane, :, 0], res.y[lane, :, 1], lw=0.9)
    ax.plot(res.y[lane, 0, 0], res.y[lane, 0, 1], "k.", ms=4)
line = np.linspace(-3, 3, 2)
ax.plot(line, -par[3] * line / par[4], "r--", lw=1, label="k = 0: equilibria, rho singular")
ax.set(xlabel=r"$\Omega_1$", ylabel=r"$\Omega_2$", xlim=(-3, 3), ylim=(-3, 3))
ax.set_aspect("equal")
ax.legend(loc="upper left", fontsize=8)
fig.tight_layout()
plt.show()
