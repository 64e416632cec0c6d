"""
The Chaplygin sleigh has no invariant measure
=============================================

García-Naranjo, L. C. & Marrero, J. C. (2020), *The geometry of nonholonomic Chaplygin systems
revisited*: by Theorem 3.11 a Chaplygin system has an invariant basic measure
``exp(sigma) ds dp`` if and only if the 1-form ``Theta = C^j_ji ds^i`` of (3.27) is exact,
``Theta = d sigma``. For the Chaplygin sleigh (a rigid body on a blade, its centre of mass at
distance ``b`` from the contact point) nhfast computes ``d Theta != 0`` whenever ``b != 0``: no
basic invariant measure.

The flow shows why. In the almost-Poisson equations on ``D*`` the divergence is
``-b p_1 / (I + m b^2)``: the forward velocity ``p_1`` grows while the rotation ``p_2`` dies
out, and the Liouville integral ``ell(t)`` of the divergence falls without bound, so phase
volume contracts onto the straight-line motions. A smooth invariant density would have to
cancel that contraction, ``log rho(x(t)) - log rho(x(0)) = -ell(t)``, along trajectories that
converge, which no density positive at the limit can do.
"""

import matplotlib.pyplot as plt
import numpy as np
import sympy as sp

import nhfast as nh
from nhfast.symbolic import almost_poisson_equations, gyroscopic_coefficients, theta_form
from nhfast.systems import chaplygin_sleigh

# %%
# ``d Theta`` on the shape space ``(y, theta)`` of the Chaplygin form
sleigh = chaplygin_sleigh(as_chaplygin=True)
theta = theta_form(gyroscopic_coefficients(sleigh))
y, th = sleigh.shape
d_theta = sp.simplify(sp.diff(theta[1], y) - sp.diff(theta[0], th))
print("Theta =", theta)
print("d Theta =", d_theta, "dy ^ dtheta")

# %%
# The flow on ``D*`` (blade frame, global), with the Liouville integral as one more state
vf = almost_poisson_equations(chaplygin_sleigh(as_chaplygin=False, blade_frame=True))
vf = vf.as_vector_field().with_divergence()
params = [1.0, 0.5, 0.5]  # m, I, b
rng = np.random.default_rng(3)
x0 = np.zeros((16, 6))
x0[:, 2] = rng.uniform(0, 2 * np.pi, 16)
x0[:, 3:5] = rng.normal(size=(16, 2))
t = np.linspace(0.0, 30.0, 301)
res = nh.integrate(vf, x0, t, params=params, rtol=1e-10, atol=1e-12)

fig, axes = plt.subplots(1, 3, figsize=(11, 3.4))
for k in range(len(x0)):
    axes[0].plot(res.y[k, :, 0], res.y[k, :, 1], lw=0.8)
    axes[1].plot(t, res.y[k, :, 4], lw=0.8)
    axes[2].plot(t, res.y[k, :, 5], lw=0.8)
axes[0].set(title="contact point", xlabel="x", ylabel="y")
axes[0].set_aspect("equal", adjustable="datalim")
axes[1].set(title="rotation $p_2$", xlabel="t")
axes[2].set(title=r"Liouville integral $\ell(t)$", xlabel="t")
fig.tight_layout()
plt.show()
