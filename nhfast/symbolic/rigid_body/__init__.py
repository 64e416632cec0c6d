"""Rigid bodies on SO(n) at matrix level: description, derivation, structured programs.

:mod:`~nhfast.symbolic.rigid_body.algebra` expands matrix expressions in the symbolic
dimension ``n`` into canonical vector terms and lowers them to an
:class:`~nhfast.codegen.IndexedProgram`; :mod:`~nhfast.symbolic.rigid_body.body` describes a
body (:class:`RigidBody`: inertia operator, potential, space- or body-fixed constraint) and
derives its reduced equations.
"""

from nhfast.symbolic.rigid_body.body import (
    OBSERVABLES,  # noqa: F401
    Constraint,  # noqa: F401
    Derivation,  # noqa: F401
    Param,  # noqa: F401
    RigidBody,
    body_fixed,
    diagonal,
    scalar,
    space_fixed,
    symmetric,
    vector,
)

__all__ = [
    "RigidBody",
    "diagonal",
    "symmetric",
    "vector",
    "scalar",
    "space_fixed",
    "body_fixed",
]
