"""Anchors for the large-n benchmarks: the embedded Veselova equations in other tools.

Every anchor integrates the equations of
:func:`nhfast.systems.veselova` (``(n, form="embedded")``) (states ``(gamma, m)``, parameters
``a_1..a_n``, potential 0), so final states can be compared lane by lane; the common problem
set-up (parameters, initial states, a NumPy reference right-hand side) is in
:mod:`anchors.problem`.
"""
