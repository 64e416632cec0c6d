"""One constructor for the Veselova body on ``SO(n)``, in the form a computation needs.

Reference: García-Naranjo & Marrero (2020), "The geometry of nonholonomic Chaplygin systems
revisited".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from nhfast.systems._common import Potential
from nhfast.systems.inertia import named_inertia
from nhfast.systems.rigid_bodies import rigid_body
from nhfast.systems.veselova_body import chart, embedded, lie, unreduced

__all__ = [
    "veselova",
]

#: The forms of :func:`veselova`: name -> (what it returns, whether any named inertia works).
FORMS: dict[str, str] = {
    "reduced": "ReducedChaplyginSystem on T*S^{n-1}: closed forms (4.12)-(4.14), hemisphere chart",
    "lie-algebra": "ReducedChaplyginSystem from brackets of left-trivialised fields, any inertia",
    "coordinates": "ChaplyginSystem on SO(n) in coordinates (an independent reduction)",
    "unreduced": "VectorField on SO(n) x so(n) with the constraint multipliers",
    "embedded": "VectorField on the whole sphere, (gamma, m) in R^{2n}, unrolled expressions",
    "structured": "StructuredVectorField on (gamma, m), looped kernels for any n, any inertia",
    "so3": "LieGroupSystem: the body equations on so(3) with advected gamma (n = 3)",
}

_ANY_INERTIA = ("lie-algebra", "structured")


def veselova(
    n: int,
    potential: Potential = None,
    *,
    form: str = "reduced",
    inertia: str | Callable[[Any], Any] = "a-omega-a",
    **options: Any,
) -> Any:
    """The multi-dimensional Veselova body (García-Naranjo & Marrero 2020, Section 4.2).

    A rigid body on ``SO(n)`` whose angular velocity in space is constrained to
    ``gamma ^ R^n`` (the LR system); one model, in the form a computation needs.

    Parameters
    ----------
    n : int
        ``n >= 3`` (``form="so3"``: ``n = 3``).
    potential : sympy.Expr or callable, optional
        ``U(gamma)``; a callable receives the list ``gamma`` (length ``n``).
    form : str
        One of :data:`FORMS`:

        * ``"reduced"`` (default) -- :class:`~nhfast.symbolic.ReducedChaplyginSystem` on
          ``T*S^{n-1}`` by the closed forms of ``K`` (4.12) and ``C`` (4.14) in the hemisphere
          chart (4.9); ``extra`` holds ``gamma``, ``c`` and the chart's ``domain``;
        * ``"lie-algebra"`` -- the same reduced data derived from brackets of left-trivialised
          fields (4.11), (4.15), for any inertia (options ``params``, ``simplify``, ``name``,
          ``compute_C``; ``compute_C`` defaults to ``n == 3`` for ``"a-omega-a"``);
        * ``"coordinates"`` -- :class:`~nhfast.symbolic.ChaplyginSystem` on ``SO(n)`` in
          coordinates, an independent route to ``K`` and ``C``;
        * ``"unreduced"`` -- :class:`~nhfast.VectorField` on ``SO(n) x so(n)`` with the
          multipliers of the constraint (4.7);
        * ``"embedded"`` -- :class:`~nhfast.VectorField` on the whole sphere, states
          ``(gamma, m)`` in ``R^{2n}``, unrolled expressions (small ``n``, symbolic work);
        * ``"structured"`` -- :class:`~nhfast.StructuredVectorField` on ``(gamma, m)`` with
          looped kernels for any ``n`` and any named inertia;
        * ``"so3"`` -- :class:`~nhfast.symbolic.LieGroupSystem`, the body equations on ``so(3)``.
    inertia : str or callable
        A name of :data:`nhfast.systems.inertia.INERTIAS`: ``"a-omega-a"`` (default,
        ``I(Om) = A Om A`` of (4.5), for which the paper's closed forms hold),
        ``"physical"`` (``J Om + Om J``) or ``"pairwise"``; the forms ``"lie-algebra"`` and
        ``"structured"`` take any of them, ``"lie-algebra"`` also a callable ``Om -> I(Om)``.
    **options
        Passed to the form's builder (``"lie-algebra"`` only).

    Returns
    -------
    ReducedChaplyginSystem, ChaplyginSystem, VectorField, StructuredVectorField or LieGroupSystem
        Parameters ``a1..an`` (``j1..jn``, ``H`` for the other inertias) in every form, so
        parameter vectors agree between forms.

    Raises
    ------
    ValueError
        For an unknown ``form`` or ``inertia``, an inertia the form has no equations for, or
        options the form does not take.

    Examples
    --------
    >>> from nhfast.systems import veselova
    >>> veselova(4).K.shape
    (3, 3)
    >>> veselova(16, form="structured", inertia="physical").n_state
    32
    """
    if form not in FORMS:
        raise ValueError(f"form must be one of {sorted(FORMS)}, got {form!r}")
    name = inertia if callable(inertia) else named_inertia(inertia).name
    if callable(inertia) and form != "lie-algebra":
        raise ValueError(f"form={form!r} takes a named inertia; a callable needs 'lie-algebra'")
    if name != "a-omega-a" and form not in _ANY_INERTIA:
        raise ValueError(
            f"form={form!r} has the equations of inertia 'a-omega-a' only, got {name!r}; "
            f"forms for any inertia: {', '.join(_ANY_INERTIA)}"
        )
    if options and form != "lie-algebra":
        raise ValueError(f"form={form!r} takes no options, got {', '.join(sorted(options))}")
    if form == "lie-algebra":
        if name == "a-omega-a":
            options.setdefault("compute_C", n == 3)
            options.setdefault("name", f"veselova_lt_{n}")
        return lie.lie_algebra_system(n, name, potential=potential, **options)
    if form == "structured" and name != "a-omega-a":
        return rigid_body(n, name, "space_fixed", potential=potential).vector_field()
    if form == "so3":
        if n != 3:
            raise ValueError(f"form='so3' needs n = 3, got {n!r}")
        return lie.so3_system(potential)
    build = {
        "reduced": chart.reduced_system,
        "coordinates": unreduced.coordinate_system,
        "unreduced": unreduced.unreduced_field,
        "embedded": embedded.unrolled_field,
        "structured": embedded.structured_field,
    }[form]
    return build(n, potential)
