"""
The vakonomic bracket and the misprinted formula it corrects
============================================================

Martínez, S., Cortés, J. & de León, M. (2000), *The geometrical theory of constraints applied
to the dynamics of vakonomic mechanical systems: the vakonomic bracket*, define the vakonomic
bracket on the final constraint submanifold ``M_2`` of the Gotay–Nester–Dirac–Bergmann
algorithm and show that it is the Dirac bracket (Proposition VII.1). Their explicit formula
(18), read as printed, gives a different value.

nhfast computes the bracket by eliminating the multipliers (``f o pi~`` as a function of
``(q, phat)``, then the canonical bracket in these Darboux coordinates of ``omega_2``), and
compares it with the Dirac bracket and with (18) read literally. The system: a metric
``diag(1, 1 + x^2/4, 1)`` on ``R^3`` with the constraints ``xdot + y zdot = 0``,
``ydot + x zdot = 0``; the bracket ``{p_x, p_z}`` along a line of ``M_2``.
"""

import matplotlib.pyplot as plt
import numpy as np
import sympy as sp

from nhfast.symbolic import NonholonomicSystem
from nhfast.symbolic.vakonomic import vakonomic_hamiltonian

x, y, z = sp.symbols("x y z", real=True)
system = NonholonomicSystem(
    [x, y, z], sp.diag(1, 1 + x**2 / 4, 1), 0, constraints=sp.Matrix([[1, 0, y], [0, 1, x]])
)
vh = vakonomic_hamiltonian(system)
print(vh.algorithm.summary())

px, py, pz = vh.p
point = {y: sp.Rational(-5, 7), z: sp.Rational(2, 3)}
phat = [sp.Rational(1, 3), sp.Rational(-4, 5), sp.Rational(6, 7)]
point.update(zip(vh.p_hat, phat, strict=True))
true = vh.vakonomic_bracket(px, pz).subs(point)
printed = vh.printed_bracket_18(px, pz).subs(point)

# %%
# At x = 3/7 the exact values are rational numbers, and they differ
at = {x: sp.Rational(3, 7)}
print("vakonomic bracket (= Dirac bracket):", sp.nsimplify(true.subs(at)))
print("(18) read as printed:              ", sp.nsimplify(printed.subs(at)))
ext = [vh.p_hat[A] - sum(vh.lam[i] * vh.W[i, A] for i in range(2)) for A in range(3)]
dirac = vh.dirac_bracket(ext[0], ext[2], at={**point, **at})
print("Dirac bracket:                     ", sp.nsimplify(dirac))

xs = np.linspace(-1.5, 1.5, 121)
fig, ax = plt.subplots(figsize=(6.4, 4.0))
ax.plot(xs, sp.lambdify(x, true)(xs), label="vakonomic bracket = Dirac bracket")
ax.plot(xs, sp.lambdify(x, printed)(xs), "--", label="formula (18) as printed")
ax.plot([3 / 7], [float(dirac)], "ko", label="Dirac bracket at x = 3/7")
ax.set(xlabel="x", ylabel=r"$\{p_x, p_z\}$ on $M_2$")
ax.legend()
fig.tight_layout()
plt.show()
