"""Pure-SymPy geometry layer of nhfast (no compiled code).

Submodules (import them directly; this package imports nothing at import time so that it never
creates an import cycle with :mod:`nhfast.systems`):

* :mod:`nhfast.symbolic.frames` -- Lie brackets, object of anholonomity, projector, K, C.
* :mod:`nhfast.symbolic.equations` -- almost-Poisson, Hamel and Chaplygin-reduced equations.
* :mod:`nhfast.symbolic.chaplygin` -- Theta, invariant measure, phi-simplicity, Hamiltonisation.
* :mod:`nhfast.symbolic.vakonomic.equations` -- vakonomic equations with multipliers, in coordinates and
  in an adapted frame; Lagrange-d'Alembert equations in coordinates; integrability of D.
* :mod:`nhfast.symbolic.vakonomic.constraint_algorithm` -- the Dirac-Bergmann constraint algorithm,
  the vakonomic Hamiltonian h2 on the final constraint submanifold, Dirac/vakonomic bracket.
"""

__all__ = ["frames", "equations", "chaplygin", "vakonomic", "constraint_algorithm"]
