"""Example library: vertical rolling disk, nonholonomic particle, Chaplygin sleigh.

All coordinates are ``Symbol(name, real=True)`` and physical parameters ``positive=True`` (the
particle's coupling ``a`` is only ``real``).  A potential may be given as an expression in those
symbols or as a callable that receives the coordinate symbols.  Sources: García-Naranjo &
Marrero (2020), Sections 3.1 (disk) and 4.1 (particle).  The Veselova body is in
:mod:`nhfast.systems.veselova_body`.

Chaplygin sleigh (worked out here, not in the sources).  With ``G = R^2`` (all translations) it
is *not* a G-Chaplygin system (``rank D + dim G = 4 > 3``); with ``G = R`` (x-translations) the
splitting holds where ``sin(theta) != 0``, shape ``(y, theta)``.  Then
``K = diag(m / sin^2 theta, I + m b^2)`` and ``d Theta = b m cos(theta) / ((I + m b^2)
sin^2 theta) dy ^ dtheta != 0`` for ``b != 0``: no basic invariant measure and not phi-simple
(``r = 2``, García-Naranjo & Marrero 2020, Cor. 3.25); for ``b = 0``,
``Theta = d ln(sin theta)`` is exact.

Chaplygin ball (Chaplygin 1903; Borisov & Mamaev 2001, 2002): a dynamically asymmetric ball
with its centre of mass at the geometric centre, rolling without slipping on a plane, written
in the body frame as a vector field on ``(M, gamma)`` (:func:`chaplygin_ball`).

References: Martínez, Cortés & de León (2000), "The geometrical theory of constraints applied to the
dynamics of vakonomic mechanical systems: the vakonomic bracket"; García-Naranjo & Marrero (2020),
"The geometry of nonholonomic Chaplygin systems revisited"; Mestdag & Crampin (2010),
"Nonholonomic systems as restricted Euler-Lagrange systems".
"""

from __future__ import annotations

from typing import Any

import sympy as sp

from nhfast.symbolic.systems import ChaplyginSystem, NonholonomicSystem
from nhfast.systems import rolling_disk
from nhfast.systems._common import Potential, potential_expr, with_frame
from nhfast.vectorfield import VectorField

__all__ = [
    "vertical_rolling_disk",
    "nonholonomic_particle",
    "holonomic_particle",
    "chaplygin_sleigh",
    "chaplygin_ball",
    "two_constraint_system",
]


#: The papers' conventions for :func:`vertical_rolling_disk`.
DISK_CONVENTIONS = ("garcia-naranjo-marrero", "mestdag-crampin", "martinez")


def vertical_rolling_disk(
    potential: Potential = None,
    *,
    convention: str = "garcia-naranjo-marrero",
    basis: str = "rotated",
) -> Any:
    """The vertical rolling disk, in the convention of one of three papers.

    * ``"garcia-naranjo-marrero"`` (default): García-Naranjo & Marrero (2020), (3.7)-(3.8), a
      :class:`~nhfast.symbolic.ChaplyginSystem`. ``Q = R^2 x T^2``, ``q = (x, y, phi,
      theta)``, ``L = 1/2 (m (xdot^2 + ydot^2) + I phidot^2 + J thetadot^2)``; constraints
      ``xdot = R cos(phi) thetadot``, ``ydot = R sin(phi) thetadot``; ``G = R^2``
      translations, shape ``(phi, theta)``; parameters ``(m, R, I, J)``.
    * ``"mestdag-crampin"``: Mestdag & Crampin (2010), ``phi`` the heading, parameters
      ``(M, I, J, R)``, with the paper's frame (see :mod:`nhfast.systems.rolling_disk`).
    * ``"martinez"``: Martínez, Cortés & de León (2000), Example VII.4, ``q = (x, y, theta,
      phi)`` with ``theta`` the heading, parameters ``(I1, I2, R)``; ``basis`` picks the
      paper's ``"rotated"`` constraint basis or the ``"cartesian"`` one (the multipliers
      depend on it).

    Parameters
    ----------
    potential : sympy.Expr or callable, optional
        ``U(phi, theta)`` (the default convention only).
    convention : str
        One of :data:`DISK_CONVENTIONS`.
    basis : {"rotated", "cartesian"}
        ``"martinez"`` only.

    Returns
    -------
    ChaplyginSystem or NonholonomicSystem

    Raises
    ------
    ValueError
        For an unknown convention, or options the convention does not take.

    Examples
    --------
    >>> vertical_rolling_disk().params
    [m, R, I, J]
    >>> vertical_rolling_disk(convention="martinez").q
    [x, y, theta, phi]
    """
    if convention not in DISK_CONVENTIONS:
        raise ValueError(f"convention must be one of {DISK_CONVENTIONS}, got {convention!r}")
    if convention != "garcia-naranjo-marrero" and potential is not None:
        raise ValueError(f"convention={convention!r} takes no potential")
    if convention != "martinez" and basis != "rotated":
        raise ValueError("basis applies to convention='martinez' only")
    if convention == "mestdag-crampin":
        return rolling_disk.mestdag_crampin_disk()
    if convention == "martinez":
        return rolling_disk.martinez_disk(basis)  # type: ignore[arg-type]
    x, y, phi, th = sp.symbols("x y phi theta", real=True)
    m, R, I, J = sp.symbols("m R I J", positive=True)  # noqa: E741
    G = sp.diag(m, m, I, J)
    W = sp.Matrix([[1, 0, 0, -R * sp.cos(phi)], [0, 1, 0, -R * sp.sin(phi)]])
    return ChaplyginSystem(
        [x, y, phi, th],
        G,
        potential_expr(potential, [phi, th]),
        constraints=W,
        shape=[phi, th],
        group=[x, y],
        params=[m, R, I, J],
    )


def nonholonomic_particle(a: Any = None, potential: Potential = None) -> ChaplyginSystem:
    """Nonholonomic particle (García-Naranjo & Marrero 2020, Section 4.1).

    ``Q = R^3``, ``L = 1/2 (xdot^2 + ydot^2 + zdot^2) + a ydot zdot - U(x, y)``, constraint
    ``zdot = y xdot``; ``G = R`` (z-translations), shape ``(x, y)``.

    Parameters
    ----------
    a : sympy.Expr or number, optional
        Coupling (``|a| < 1``); default: the parameter symbol ``a``.
    potential : sympy.Expr or callable, optional
        ``U(x, y)``.

    Returns
    -------
    ChaplyginSystem
    """
    return _particle(a, potential, integrable=False)


def holonomic_particle(potential: Potential = None) -> ChaplyginSystem:
    """Particle metric of Section 4.1 with the *integrable* constraint ``zdot = y xdot + x ydot``.

    ``D = ker d(z - x y)`` is integrable, so the gyroscopic tensor must vanish
    (García-Naranjo & Marrero 2020, Prop. 3.5).  Parameter ``a`` as in
    :func:`nonholonomic_particle`.

    Parameters
    ----------
    potential : sympy.Expr or callable, optional
        ``U(x, y)``, as for :func:`nonholonomic_particle`.

    Returns
    -------
    ChaplyginSystem
    """
    return _particle(None, potential, integrable=True)


def _particle(a: Any, potential: Potential, integrable: bool) -> ChaplyginSystem:
    """The particle of Section 4.1 with ``zdot = y xdot`` (or ``y xdot + x ydot``)."""
    x, y, z = sp.symbols("x y z", real=True)
    params: list[sp.Symbol] = []
    if a is None:
        a = sp.Symbol("a", real=True)
        params.append(a)
    a = sp.sympify(a)
    G = sp.Matrix([[1, 0, 0], [0, 1, a], [0, a, 1]])
    W = sp.Matrix([[-y, -x if integrable else 0, 1]])
    return ChaplyginSystem(
        [x, y, z],
        G,
        potential_expr(potential, [x, y]),
        constraints=W,
        shape=[x, y],
        group=[z],
        params=params,
    )


def chaplygin_sleigh(
    as_chaplygin: bool = True, potential: Potential = None, blade_frame: bool = False
) -> NonholonomicSystem:
    """Chaplygin sleigh: ``q = (x, y, theta)`` (contact point, heading), parameters ``(m, I, b)``.

    ``T = 1/2 m ((xdot - b sin(theta) thetadot)^2 + (ydot + b cos(theta) thetadot)^2)
    + 1/2 I thetadot^2`` (``I`` about the centre of mass), constraint
    ``-sin(theta) xdot + cos(theta) ydot = 0``.

    Parameters
    ----------
    as_chaplygin : bool, optional
        True: a :class:`ChaplyginSystem` with ``G`` = x-translations, shape ``(y, theta)``
        (valid where ``sin(theta) != 0``).  False: a plain :class:`NonholonomicSystem`.
    potential : sympy.Expr or callable, optional
        ``U(y, theta)`` (must not depend on ``x`` for the Chaplygin form).
    blade_frame : bool, optional
        With ``as_chaplygin=False``: use the global frame of D, ``(cos theta, sin theta, 0)``
        (along the blade) and ``d/dtheta``, instead of the frame computed from the 1-form,
        ``(1, tan theta, 0)``, which is singular at ``theta = pi/2``.

    Returns
    -------
    NonholonomicSystem or ChaplyginSystem

    Raises
    ------
    ValueError
        If ``blade_frame`` is asked for the Chaplygin form.
    """
    x, y, th = sp.symbols("x y theta", real=True)
    m, I, b = sp.symbols("m I b", positive=True)  # noqa: E741
    G = sp.Matrix(
        [
            [m, 0, -m * b * sp.sin(th)],
            [0, m, m * b * sp.cos(th)],
            [-m * b * sp.sin(th), m * b * sp.cos(th), I + m * b**2],
        ]
    )
    W = sp.Matrix([[-sp.sin(th), sp.cos(th), 0]])
    U = potential_expr(potential, [y, th])
    if as_chaplygin:
        if blade_frame:
            raise ValueError("blade_frame: only for as_chaplygin=False (a plain system)")
        return ChaplyginSystem(
            [x, y, th], G, U, constraints=W, shape=[y, th], group=[x], params=[m, I, b]
        )
    system = NonholonomicSystem([x, y, th], G, U, constraints=W, params=[m, I, b])
    if blade_frame:
        with_frame(system, sp.Matrix([[sp.cos(th), 0], [sp.sin(th), 0], [0, 1]]))
    return system


def chaplygin_ball() -> VectorField:
    """Chaplygin's rolling ball in the body frame, states ``(M1, M2, M3, gamma1, gamma2, gamma3)``.

    A ball of radius ``a`` and mass ``m`` whose centre of mass is its geometric centre, with
    principal moments ``I1, I2, I3`` about it, rolls without slipping on a horizontal plane
    (S. A. Chaplygin, "On a ball's rolling on a horizontal plane", Mat. Sbornik 24 (1903);
    A. V. Borisov and I. S. Mamaev, "Chaplygin's ball rolling problem is Hamiltonian", Math.
    Notes 70 (2001) 720-723, and "Rolling of a rigid body on plane and sphere. Hierarchy of
    dynamics", Regul. Chaotic Dyn. 7 (2002) 177-200).  ``gamma`` is the unit normal of the
    plane and ``M`` the angular momentum about the contact point, both in the body frame::

        M = I omega + m a^2 gamma x (omega x gamma),   M' = M x omega,   gamma' = gamma x omega.

    With ``d = m a^2`` and ``|gamma| = 1``, ``M = (I + d) omega - d <gamma, omega> gamma``, so
    (``D = I + d``, diagonal)::

        omega = D^-1 M + d k D^-1 gamma,   k = <gamma, omega> = <gamma, D^-1 M> / g,
        g = 1 - d <gamma, D^-1 gamma>.

    This form (``|gamma|^2`` replaced by 1 in ``gamma x (omega x gamma)``) is used on all of
    ``R^6``; the sphere ``|gamma| = 1`` is invariant.  The invariant density is
    ``rho = g^(-1/2) = (1 - m a^2 <gamma, (I + m a^2)^-1 gamma>)^(-1/2)`` (Chaplygin 1903;
    Borisov-Mamaev), with respect to ``dM dgamma`` (:func:`chaplygin_ball_density`); it is
    invariant on all of ``R^6`` for this form, since ``div(rho X) = 0`` identically.

    Returns
    -------
    VectorField
        Parameters ``(I1, I2, I3, m, a)``; observables ``energy`` (``<M, omega> / 2``),
        ``M_gamma`` (``<M, gamma>``), ``gamma2`` (``<gamma, gamma>``) and ``M2``
        (``<M, M>``), all first integrals on ``|gamma| = 1``, then the body angular velocity
        ``omega1..omega3`` (above); domain ``g > 0`` (where ``omega`` is defined; it holds on
        ``|gamma| = 1``).
    """
    M = sp.Matrix(sp.symbols("M1:4", real=True))
    g = sp.Matrix(sp.symbols("gamma1:4", real=True))
    I1, I2, I3, m, a = sp.symbols("I1 I2 I3 m a", positive=True)
    d = m * a**2
    Dinv = sp.diag(*[1 / (Ii + d) for Ii in (I1, I2, I3)])
    gfac = 1 - d * (g.T * Dinv * g)[0]
    k = (g.T * Dinv * M)[0] / gfac
    omega = Dinv * M + d * k * Dinv * g
    rhs = [*M.cross(omega), *g.cross(omega)]
    return VectorField(
        states=[*M, *g],
        rhs=rhs,
        params=[I1, I2, I3, m, a],
        observables={
            "energy": (M.T * omega)[0] / 2,
            "M_gamma": (M.T * g)[0],
            "gamma2": (g.T * g)[0],
            "M2": (M.T * M)[0],
            **{f"omega{k + 1}": w for k, w in enumerate(omega)},
        },
        name="Chaplygin ball",
        domain={"Chaplygin ball: 1 - m a^2 <gamma, (I + m a^2)^-1 gamma>": gfac},
    )


def chaplygin_ball_density(vf: VectorField | None = None) -> sp.Expr:
    """The invariant density ``(1 - m a^2 <gamma, (I + m a^2)^-1 gamma>)^(-1/2)`` of
    :func:`chaplygin_ball` (Chaplygin 1903; Borisov and Mamaev 2001), in the symbols of ``vf``
    (default: a new :func:`chaplygin_ball`)."""
    vf = chaplygin_ball() if vf is None else vf
    g = vf.states[3:]
    I1, I2, I3, m, a = vf.params
    d = m * a**2
    return (1 - d * sum(gi**2 / (Ii + d) for gi, Ii in zip(g, (I1, I2, I3), strict=True))) ** (
        sp.Rational(-1, 2)
    )


def two_constraint_system() -> NonholonomicSystem:
    """A synthetic system with two nonintegrable constraints and a nonzero Dirac block ``N``.

    A test system constructed here (it is not in the papers), with a potential:
    ``q = (x, y, z)``, ``L = 1/2 (xdot^2 + (1 + x^2/4) ydot^2 + zdot^2) - k (x^2 + y z)/2`` and
    ``xdot + y zdot = 0``, ``ydot + x zdot = 0``. The metric is not constant and the
    constraint forms depend on ``q``, so the vakonomic constraint algorithm of Martínez et
    al. (2000) meets ``N != 0`` in its Dirac matrix (for the rolling disk
    ``N = 0``); a test bed for the vakonomic equations and brackets.

    Returns
    -------
    NonholonomicSystem
        Parameter ``k`` (positive).
    """
    x, y, z = sp.symbols("x y z", real=True)
    k = sp.Symbol("k", positive=True)
    return NonholonomicSystem(
        [x, y, z],
        sp.diag(1, 1 + x**2 / 4, 1),
        k * (x**2 + y * z) / 2,
        constraints=sp.Matrix([[1, 0, y], [0, 1, x]]),
        params=[k],
    )
