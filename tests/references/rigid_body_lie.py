"""Rigid bodies on ``SO(n)`` by the generic Lie-group route: an independent reference.

A matrix-level inertia operator ``I: so(n) -> so(n)`` (a SymPy expression of the skew ``n x n``
``Omega``) is turned into the ``N x N`` matrix of the quadratic form ``1/2 <I(Omega), Omega>``,
``N = n(n-1)/2``, in the basis ``E_(i,j) = e_i ^ e_j = e_i e_j^T - e_j e_i^T`` (``i < j``,
row-major, the order of :func:`~nhfast.symbolic.liegroup.son_structure_constants`), with the
Killing pairing ``<X, Y> = -1/2 tr(X Y)``.  This basis is Killing-orthonormal, so the component
``Omega_(i,j)`` is the matrix entry ``Omega[i, j]`` and ``I_ab = <I(E_a), E_b>``.  The equations
are then the component Euler-Poincare-Suslov equations of
:class:`~nhfast.symbolic.liegroup.LieGroupSystem` (structure constants, ``ad*``, multipliers),
which in matrix form read ::

    d/dt I(Omega) = [I(Omega), Omega] + grad U(gamma) ^ gamma + reaction,
    gammadot = -Omega gamma,        gamma = g^T e_n  (g dot = g Omega),

with one of two constraint families:

* ``"space_fixed"`` (Veselova / LR): ``Omega in gamma ^ R^n`` (García-Naranjo & Marrero 2020,
  (4.7), (4.11)).  Annihilator rows, one per ``i < j < n``::

      Omega_ij gamma_n + Omega_jn gamma_i + Omega_ni gamma_j = 0

  (the cyclic sum vanishes on ``gamma ^ v`` for every ``v``; the rows have full rank
  ``N - (n - 1)`` wherever ``gamma_n != 0`` since row ``(i, j)`` is the only one containing
  ``Omega_ij``, with coefficient ``gamma_n``).  Valid away from the equator ``gamma_n = 0``.
* ``"body_fixed"`` (Suslov family, left-invariant): ``Omega in e ^ R^n`` for a fixed body
  axis ``e`` (``e_n`` by default: ``Omega_ij = 0`` for ``i < j < n``; or a parameter vector,
  rows as above with ``gamma`` replaced by ``e``); ``gamma`` is still advected (it carries
  the potential).

:meth:`RigidBodyLieSystem.projected_vector_field` writes the same equations with the
constraint as ``Q Omega = 0``, ``Q`` the Killing-orthogonal projector onto ``so(b^perp)``,
which has no chart singularity (use it for long trajectories);
:meth:`~nhfast.symbolic.liegroup.LieGroupSystem.as_vector_field` is LieGroupSystem's own
saddle-point form with the rows above.  The two agree pointwise where the rows have full rank.

The force of a potential ``U(gamma)`` is ``F_(i,j) = (grad U ^ gamma)_ij``: from
``delta gamma = -eta gamma`` for ``eta = g^{-1} delta g``, ``-dU(eta) = grad U^T eta gamma
= <grad U ^ gamma, eta>``; for ``n = 3`` this is the heavy-top torque ``gamma x grad U`` of
:func:`nhfast.systems.veselova` (``(3, form="so3")``).

The maps :func:`embedded_from_lie` / :func:`lie_from_embedded` connect these states
``(Omega_(i,j)..., gamma)`` with the embedded states ``(gamma, m)``, ``m = -I(Omega) b``, where
``b = gamma`` (space fixed) or ``b = e`` (body fixed) and ``Omega = b ^ v``, ``v`` orthogonal
to ``b`` (for the space-fixed family ``v = gammadot``); :func:`embedded_tangent_from_lie` maps
right-hand sides.  These are the states of the matrix-level engine
(:mod:`nhfast.symbolic.rigid_body`), which ``tests/systems/test_rigid_body_agreement.py``
checks against this route.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import sympy as sp

from nhfast.symbolic.liegroup import LieGroupSystem, son_structure_constants
from nhfast.vectorfield import LinearSolve, VectorField

__all__ = [
    "CONSTRAINTS",
    "INERTIAS",
    "so_n_pairs",
    "so_n_basis",
    "killing_pairing",
    "so_n_inertia_matrix",
    "rigid_body_inertia",
    "parameter_symbols",
    "RigidBodyLieSystem",
    "rigid_body_lie_system",
    "numeric_inertia_matrix",
    "constraint_of",
    "embedded_from_lie",
    "embedded_tangent_from_lie",
    "lie_from_embedded",
]

#: The constraint families.
CONSTRAINTS = ("space_fixed", "body_fixed")

#: The named inertia operators of :func:`rigid_body_inertia`.
INERTIAS = ("a-omega-a", "physical", "pairwise")

#: A matrix-level inertia operator ``inertia(Omega, *params) -> sympy.Matrix``.
InertiaOperator = Callable[..., Any]


def so_n_pairs(n: int) -> list[tuple[int, int]]:
    """Index pairs ``(i, j)``, ``i < j``, row-major: the order of the basis of ``so(n)``."""
    return [(i, j) for i in range(n) for j in range(i + 1, n)]


def so_n_basis(n: int) -> list[sp.Matrix]:
    """The basis ``E_(i,j) = e_i e_j^T - e_j e_i^T`` (order of :func:`so_n_pairs`)."""
    out = []
    for i, j in so_n_pairs(n):
        e = sp.zeros(n, n)
        e[i, j], e[j, i] = 1, -1
        out.append(e)
    return out


def killing_pairing(x: sp.Matrix, y: sp.Matrix) -> sp.Expr:
    """``<X, Y> = -1/2 tr(X Y)`` (the basis :func:`so_n_basis` is orthonormal for it)."""
    return -sp.Rational(1, 2) * (x * y).trace()


def _check_n(n: Any) -> int:
    if not isinstance(n, int) or isinstance(n, bool):
        raise TypeError(f"n must be an int, got {type(n).__name__}")
    if n < 3:
        raise ValueError(f"n must be >= 3, got {n}")
    return n


def _as_matrix(value: Any, n: int, what: str) -> sp.Matrix:
    mat = sp.Matrix(value)
    if mat.shape != (n, n):
        raise ValueError(f"{what} must be an {n} x {n} matrix, got shape {mat.shape}")
    return mat


def so_n_inertia_matrix(n: int, inertia: InertiaOperator, params: Sequence[Any] = ()) -> sp.Matrix:
    """Matrix ``I_ab = <I(E_a), E_b>`` of a matrix-level inertia operator on ``so(n)``.

    Parameters
    ----------
    n : int
        ``n >= 3``.
    inertia : callable
        ``inertia(Omega, *params)`` returns the ``n x n`` SymPy matrix ``I(Omega)`` for an
        explicit skew SymPy matrix ``Omega``; it must be linear, map ``so(n)`` to ``so(n)`` and
        be symmetric for the Killing pairing (checked).
    params : sequence
        Extra arguments of ``inertia`` (symbols or SymPy matrices).

    Returns
    -------
    sympy.Matrix, shape (N, N)
        With ``Omega = sum_a Omega_a E_a``, ``1/2 <I(Omega), Omega> = 1/2 Omega^T I Omega`` and
        ``I(Omega) = sum_b (I Omega)_b E_b``.

    Raises
    ------
    ValueError
        If ``I(E_a)`` is not skew or the matrix is not symmetric.
    """
    n = _check_n(n)
    basis = so_n_basis(n)
    images = []
    for a, e in enumerate(basis):
        img = _as_matrix(inertia(e, *params), n, "inertia(Omega)")
        if any(sp.expand(x) != 0 for x in img + img.T):
            raise ValueError(f"inertia(E_{so_n_pairs(n)[a]}) is not skew-symmetric")
        images.append(img)
    N = len(basis)
    mat = sp.Matrix(N, N, lambda a, b: sp.expand(killing_pairing(images[a], basis[b])))
    if any(sp.expand(x) != 0 for x in mat - mat.T):
        raise ValueError("the inertia operator is not symmetric for the Killing pairing")
    return mat


def rigid_body_inertia(n: int, kind: str) -> tuple[InertiaOperator, tuple[sp.Matrix, ...]]:
    """One of the named inertia operators, with its parameter matrices.

    * ``"a-omega-a"``: ``I(Omega) = A Omega A``, ``A = diag(a1..an)`` (García-Naranjo & Marrero
      2020, (4.5));
    * ``"physical"``: ``I(Omega) = J Omega + Omega J``, ``J = diag(j1..jn)``;
    * ``"pairwise"``: ``I(Omega)_ij = H_ij Omega_ij`` (Hadamard product), ``H`` an ``n x n``
      matrix of the ``n*n`` symbols ``h<i>_<j>`` (row-major; only the values for ``i != j``
      matter and ``H`` must be symmetric in value: one inertia per pair).

    The parameter vector (:func:`parameter_symbols`) is ``a1..an``, ``j1..jn`` or the ``n*n``
    entries of ``H`` row-major.

    Returns
    -------
    (callable, tuple of sympy.Matrix)
        ``inertia`` and ``params`` for :func:`rigid_body_lie_system`.
    """
    n = _check_n(n)
    if kind == "a-omega-a":
        A = sp.diag(*sp.symbols(f"a1:{n + 1}", positive=True))
        return (lambda Om, A: A * Om * A), (A,)
    if kind == "physical":
        J = sp.diag(*sp.symbols(f"j1:{n + 1}", positive=True))
        return (lambda Om, J: J * Om + Om * J), (J,)
    if kind == "pairwise":
        H = sp.Matrix(n, n, lambda i, j: sp.Symbol(f"h{i + 1}_{j + 1}", positive=True))

        def hadamard(Om: sp.Matrix, H: sp.Matrix) -> sp.Matrix:
            # (H_ij + H_ji)/2 keeps the image skew for a symbolic (not yet symmetric) H
            return sp.Matrix(n, n, lambda i, j: (H[i, j] + H[j, i]) / 2 * Om[i, j])

        return hadamard, (H,)
    raise ValueError(f"inertia must be one of {INERTIAS}, got {kind!r}")


def parameter_symbols(params: Sequence[Any]) -> list[sp.Symbol]:
    """The parameter vector of ``params``: symbols in order of first appearance, matrices read
    row-major (entries that are not symbols, e.g. the zeros of a diagonal matrix, skipped)."""
    out: list[sp.Symbol] = []
    for p in params:
        for e in list(p) if isinstance(p, sp.MatrixBase) else [p]:
            e = sp.sympify(e)
            if isinstance(e, sp.Symbol):
                if e not in out:
                    out.append(e)
            elif not e.is_number:
                raise TypeError(f"params: {e!r} is neither a symbol nor a number")
    return out


def _matmul(A: sp.Matrix, B: sp.Matrix) -> sp.Matrix:
    """Product of SymPy matrices skipping zero terms (no domain conversion: much faster than
    ``A * B`` for the sparse rational entries here)."""
    return sp.Matrix(
        A.rows,
        B.cols,
        lambda i, j: sp.Add(
            *[A[i, k] * B[k, j] for k in range(A.cols) if A[i, k] != 0 and B[k, j] != 0]
        ),
    )


def _skew_sym(w: Sequence[Any], n: int) -> sp.Matrix:
    Om = sp.zeros(n, n)
    for (i, j), x in zip(so_n_pairs(n), w, strict=True):
        Om[i, j], Om[j, i] = x, -x
    return Om


def _potential_expr(potential: Any, gamma: sp.Matrix, params: Sequence[Any]) -> sp.Expr:
    if potential is None:
        return sp.Integer(0)
    U = potential(gamma, *params) if callable(potential) else potential
    if isinstance(U, sp.MatrixBase):
        if U.shape != (1, 1):
            raise ValueError(f"potential must be a scalar or a 1 x 1 matrix, got {U.shape}")
        U = U[0, 0]
    return sp.sympify(U)


def _wedge(u: sp.Matrix, w: sp.Matrix) -> sp.Matrix:
    return u * w.T - w * u.T


class RigidBodyLieSystem(LieGroupSystem):
    """A :class:`~nhfast.symbolic.liegroup.LieGroupSystem` on ``so(n)`` that knows ``n`` and its
    constraint family (built by :func:`rigid_body_lie_system`).

    The Lie-algebra check of the structure constants is done exactly in integer arithmetic
    (NumPy) when they are integers (as for :func:`son_structure_constants`), instead of
    ``N^5`` symbolic simplifications: ``so(5)`` builds in a fraction of a second.

    Attributes
    ----------
    n : int
    constraint : str
        ``"space_fixed"`` or ``"body_fixed"``.
    body_axis : sympy.Matrix, shape (n, 1)
        The body-fixed axis ``e`` of the Suslov family (``e_n`` unless given).
    """

    n: int
    constraint: str
    body_axis: sp.Matrix

    def constraint_projector(self, derivative: bool = False) -> sp.Matrix:
        """Components of ``Q``, the Killing-orthogonal projector onto ``so(b^perp)`` (the
        annihilator of the constraint subspace ``b ^ R^n``)::

            Q(X) = X + b ^ (X b) / |b|^2,        b = gamma (space fixed) or e_n (body fixed),
            Q_(ij),(kl) = d_ik d_jl + (f_il d_jk - f_ik d_jl - f_jl d_ik + f_jk d_il),
            f_il = b_i b_l / |b|^2.

        ``Q`` is the identity on ``so(b^perp)`` and zero on ``b ^ b^perp``, and symmetric in the
        orthonormal basis ``E_(i,j)``; ``D = ker Q`` everywhere (also on the equator
        ``gamma_n = 0``, where the row annihilator of :func:`rigid_body_lie_system` loses rank).

        Parameters
        ----------
        derivative : bool
            Return ``Qdot`` instead (``f`` replaced by its time derivative along
            ``gammadot``; zero for the body-fixed family).
        """
        n = self.n
        pairs = so_n_pairs(n)
        N = len(pairs)
        if self.constraint == "space_fixed":
            b = list(self.advected)
            bdot = list(self.advected_rhs)
        else:
            b = list(self.body_axis)
            bdot = [sp.Integer(0)] * n
        r2 = sp.Add(*[x**2 for x in b])
        r2dot = 2 * sp.Add(*[x * y for x, y in zip(b, bdot, strict=True)])

        def f(i: int, l_: int) -> sp.Expr:
            if derivative:
                return (bdot[i] * b[l_] + b[i] * bdot[l_]) / r2 - b[i] * b[l_] * r2dot / r2**2
            return b[i] * b[l_] / r2

        def d(i: int, j: int) -> int:
            return 1 if i == j else 0

        Q = sp.zeros(N, N)
        for x, (i, j) in enumerate(pairs):
            for y, (k, l_) in enumerate(pairs):
                e = sp.Add(
                    *[
                        sgn * f(p, q)
                        for sgn, p, q, u, w in (
                            (1, i, l_, j, k),
                            (-1, i, k, j, l_),
                            (-1, j, l_, i, k),
                            (1, j, k, i, l_),
                        )
                        if u == w
                    ]
                )
                Q[x, y] = e + (0 if derivative else d(i, k) * d(j, l_))
        return Q

    def projected_vector_field(self) -> VectorField:
        """The same equations with the constraint written as ``Q Omega = 0`` (globally valid).

        Lagrange-d'Alembert with the reaction in ``range Q`` (the annihilator of ``D``) reads
        ``P (I Omegadot - r) = 0``, ``Q Omegadot = -Qdot Omega`` with ``P = 1 - Q`` and
        ``r = ad*_Omega I Omega + F``, i.e. the linear system ::

            (P I + Q) Omegadot = P r - Qdot Omega

        (nonsingular: ``Q`` fixes the ``range Q`` part, ``P I P`` is SPD on ``D``), solved
        numerically in the kernels (LU).  ``Qdot`` is the chain-rule derivative through the
        advected ``gamma``.  Unlike :meth:`as_vector_field` it has no chart singularity.

        Returns
        -------
        VectorField
            States ``Omega`` then ``gamma``; observables ``energy``, ``constraint``
            (``|Q Omega|^2``) and ``gamma_norm``.
        """
        N = self.N
        W = sp.Matrix(self.velocities)
        Q = self.constraint_projector()
        Qdot = self.constraint_projector(derivative=True)
        P = sp.eye(N) - Q
        r = sp.Matrix([e + f for e, f in zip(self.coadjoint(), self.force, strict=True)])
        PI, Pr, QdW = _matmul(P, self.inertia), _matmul(P, r), _matmul(Qdot, W)
        taken = {str(x) for x in [*self.velocities, *self.advected, *self.params]}
        acc = [sp.Symbol(f"dOmega{k + 1}", real=True) for k in range(N)]
        if any(str(a) in taken for a in acc):  # pragma: no cover - symbols are Omega<i>_<j>
            raise ValueError("symbol clash in projected_vector_field")
        solve = LinearSolve(unknowns=acc, matrix=PI + Q, rhs=list(Pr - QdW), spd=False)
        QW = _matmul(Q, W)
        return VectorField(
            states=[*self.velocities, *self.advected],
            rhs=[*acc, *self.advected_rhs],
            params=self.params,
            observables={
                "energy": self.energy(),
                "constraint": sp.Add(*[e**2 for e in QW]),
                **self.extra_observables,
            },
            solves=[solve],
            name=f"{self.name}_projected",
        )

    @staticmethod
    def _check_lie(c: sp.MutableDenseNDimArray, N: int) -> None:
        flat = sp.flatten(c.tolist())
        if not all(isinstance(x, sp.Integer) for x in flat):
            LieGroupSystem._check_lie(c, N)
            return
        ci = np.array([int(x) for x in flat], dtype=np.int64).reshape(N, N, N)
        if np.any(ci + ci.transpose(1, 0, 2)):
            raise ValueError("structure_constants are not skew")
        jac = np.einsum("ijl,lkm->ijkm", ci, ci)
        jac = jac + jac.transpose(1, 2, 0, 3) + jac.transpose(2, 0, 1, 3)
        if np.any(jac):
            raise ValueError("structure_constants violate the Jacobi identity")


def rigid_body_lie_system(
    n: int,
    inertia: InertiaOperator,
    constraint: str = "space_fixed",
    potential: Any = None,
    params: Sequence[Any] = (),
    axis: Sequence[Any] | None = None,
) -> RigidBodyLieSystem:
    """A rigid body on ``SO(n)`` as a :class:`~nhfast.symbolic.liegroup.LieGroupSystem`.

    Parameters
    ----------
    n : int
        ``n >= 3``.
    inertia : callable
        ``inertia(Omega, *params)``: the matrix-level inertia operator (see
        :func:`so_n_inertia_matrix`; :func:`rigid_body_inertia` gives the named ones).
    constraint : {"space_fixed", "body_fixed"}
        ``Omega in gamma ^ R^n`` (Veselova, LR; the annihilator has full rank where
        ``gamma_n != 0``) or ``Omega in e_n ^ R^n`` (Suslov family, left-invariant).
    potential : callable, sympy.Expr or None
        ``U(gamma)``: a callable receives the ``n x 1`` matrix of the symbols
        ``gamma1..gamma<n>`` and ``*params`` and returns a scalar (or ``1 x 1`` matrix); an
        expression may use those symbols directly.
    params : sequence
        Symbols or SymPy matrices passed to ``inertia`` and ``potential``; the parameter
        vector is :func:`parameter_symbols` of it.
    axis : sequence of n symbols or numbers, optional
        ``"body_fixed"`` only: the body axis ``e`` (``Omega in e ^ R^n``) instead of ``e_n``;
        its symbols not already in ``params`` are appended to the parameter vector (as the
        engine's ``suslov_rigid_body(..., axis=True)`` does).  The row annihilator then needs
        ``e_n != 0``.

    Returns
    -------
    RigidBodyLieSystem
        States (of its vector field): ``Omega_(i,j)`` (symbols ``Omega<i>_<j>``, order of
        :func:`so_n_pairs`) then ``gamma1..gamma<n>``; observables ``energy``, ``constraint``,
        ``gamma_norm`` (``|gamma|^2``).

    Raises
    ------
    ValueError
        On an unknown ``constraint`` or an inertia that is not a symmetric operator of
        ``so(n)``.
    """
    n = _check_n(n)
    if constraint not in CONSTRAINTS:
        raise ValueError(f"constraint must be one of {CONSTRAINTS}, got {constraint!r}")
    params = tuple(params)
    if axis is not None and constraint != "body_fixed":
        raise ValueError("axis needs constraint='body_fixed'")
    e = sp.eye(n)[:, -1] if axis is None else sp.Matrix(list(axis))
    if e.shape != (n, 1):
        raise ValueError(f"axis must have {n} components, got {e.shape[0]}")
    par_syms = parameter_symbols(params)
    par_syms += [x for x in parameter_symbols([e]) if x not in par_syms]
    pairs = so_n_pairs(n)
    N = len(pairs)
    index = {p: k for k, p in enumerate(pairs)}
    W = list(sp.symbols(" ".join(f"Omega{i + 1}_{j + 1}" for i, j in pairs), real=True))
    g = list(sp.symbols(f"gamma1:{n + 1}", real=True))
    gv = sp.Matrix(g)
    Om = _skew_sym(W, n)
    I_mat = so_n_inertia_matrix(n, inertia, params)
    last = n - 1
    rows = []
    for i, j in pairs:
        if j == last:
            continue
        # Omega_ij b_n + Omega_jn b_i + Omega_ni b_j (Omega_ni = -Omega_in), b = gamma or e
        b = g if constraint == "space_fixed" else list(e)
        row = [sp.Integer(0)] * N
        row[index[(i, j)]] = b[last]
        row[index[(j, last)]] = b[i]
        row[index[(i, last)]] = -b[j]
        rows.append(row)
    U = _potential_expr(potential, gv, params)
    dU = sp.Matrix([sp.diff(U, x) for x in g])
    F = _wedge(dU, gv)  # grad U ^ gamma
    system = RigidBodyLieSystem(
        son_structure_constants(n),
        I_mat,
        sp.Matrix(rows),
        velocities=W,
        params=par_syms,
        advected=g,
        advected_rhs=list(-Om * gv),
        force=[F[i, j] for i, j in pairs],
        potential=U,
        observables={"gamma_norm": sum(x**2 for x in g)},
        name=f"rigid_body_lie_{constraint}_{n}",
    )
    system.n, system.constraint, system.body_axis = n, constraint, e
    return system


# ------------------------------------------------------------------------------------------
# maps to and from the embedded states (gamma, m) (NumPy, lane by lane)
# ------------------------------------------------------------------------------------------


def numeric_inertia_matrix(system: LieGroupSystem, params: Any) -> np.ndarray:
    """The ``N x N`` inertia matrix of ``system`` at parameter values.

    Parameters
    ----------
    system : LieGroupSystem
    params : array_like, shape (n_params,) or (..., n_params)

    Returns
    -------
    ndarray, shape (..., N, N)
    """
    p = np.asarray(params, dtype=float)
    npar = len(system.params)
    if p.shape[-1:] != (npar,) and not (npar == 0 and p.size == 0):
        raise ValueError(f"params must have shape (..., {npar}), got {p.shape}")
    f = sp.lambdify(system.params, system.inertia, modules="numpy")
    if p.ndim <= 1:
        return np.asarray(f(*p), dtype=float)
    flat = p.reshape(-1, npar)
    out = np.stack([np.asarray(f(*row), dtype=float) for row in flat])
    return out.reshape(*p.shape[:-1], system.N, system.N)


def constraint_of(system: LieGroupSystem) -> str:
    """The constraint family of ``system``: its ``constraint`` attribute if it has one, else
    ``"body_fixed"`` if its annihilator is constant and ``"space_fixed"`` otherwise."""
    known = getattr(system, "constraint", None)
    if known in CONSTRAINTS:
        return str(known)
    return "space_fixed" if system.annihilator.free_symbols else "body_fixed"


def _n_of(system: LieGroupSystem) -> int:
    return len(system.advected)


def _skew(w: np.ndarray, n: int) -> np.ndarray:
    Om = np.zeros((*w.shape[:-1], n, n))
    for k, (i, j) in enumerate(so_n_pairs(n)):
        Om[..., i, j] = w[..., k]
        Om[..., j, i] = -w[..., k]
    return Om


def _apply_inertia(I_num: np.ndarray, Om: np.ndarray, n: int) -> np.ndarray:
    """``I(Omega)`` as a matrix: ``sum_b (I Omega)_b E_b``."""
    pairs = so_n_pairs(n)
    w = np.stack([Om[..., i, j] for i, j in pairs], axis=-1)
    return _skew(np.einsum("...ab,...b->...a", I_num, w), n)


def _axis_lanes(system: LieGroupSystem, params: Any, lead: tuple[int, ...]) -> np.ndarray:
    """The body axis at the parameter values, one row per lane."""
    n = _n_of(system)
    axis = getattr(system, "body_axis", sp.eye(n)[:, -1])
    f = sp.lambdify(system.params, list(axis), modules="numpy")
    p = np.asarray(params, dtype=float)
    if p.ndim <= 1:
        e = np.asarray(f(*p), dtype=float) * np.ones(n)
    else:
        flat = p.reshape(-1, p.shape[-1])
        e = np.stack([np.asarray(f(*row), dtype=float) * np.ones(n) for row in flat])
        e = e.reshape(*p.shape[:-1], n)
    return np.broadcast_to(e, (*lead, n)).reshape(-1, n)


def _lanes(
    x: np.ndarray, I_num: np.ndarray, N: int
) -> tuple[np.ndarray, np.ndarray, tuple[int, ...]]:
    lead = x.shape[:-1]
    xf = x.reshape(-1, x.shape[-1])
    If = np.broadcast_to(I_num, (*lead, N, N)).reshape(-1, N, N)
    return xf, If, lead


def embedded_from_lie(
    states: Any, params: Any, system: LieGroupSystem, constraint: str | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Embedded ``(gamma, m)`` from states ``(Omega_(i,j)..., gamma)`` of ``system``.

    ``m = -I(Omega) b`` with ``b = gamma`` (space fixed) or ``b = e`` (body fixed: the
    system's ``body_axis``, ``e_n`` by default).

    Parameters
    ----------
    states : array_like, shape (..., N + n)
    params : array_like, shape (n_params,) or (..., n_params)
    system : LieGroupSystem
        From :func:`rigid_body_lie_system`.
    constraint : {"space_fixed", "body_fixed"}, optional
        Default: :func:`constraint_of` ``system``.

    Returns
    -------
    gamma, m : ndarray, shape (..., n)
    """
    n, N = _n_of(system), system.N
    constraint = constraint or constraint_of(system)
    x = np.asarray(states, dtype=float)
    if x.shape[-1] != N + n:
        raise ValueError(f"states must have shape (..., {N + n}), got {x.shape}")
    I_num = numeric_inertia_matrix(system, params)
    xf, If, lead = _lanes(x, I_num, N)
    gamma = xf[:, N:]
    IOm = _skew(np.einsum("lab,lb->la", If, xf[:, :N]), n)
    b = gamma if constraint == "space_fixed" else _axis_lanes(system, params, lead)
    m = -np.einsum("lij,lj->li", IOm, b)
    return gamma.reshape(*lead, n).copy(), m.reshape(*lead, n)


def embedded_tangent_from_lie(
    states: Any, rates: Any, params: Any, system: LieGroupSystem, constraint: str | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """``(gammadot, mdot)`` of the embedded states from ``(Omegadot, gammadot)`` (the chain rule
    of :func:`embedded_from_lie`): ``mdot = -I(Omegadot) b - I(Omega) bdot``, ``bdot =
    gammadot`` (space fixed) or 0 (body fixed).

    Parameters
    ----------
    states, rates : array_like, shape (..., N + n)
        States of ``system`` and their time derivatives (e.g. its right-hand side).
    params : array_like, shape (n_params,) or (..., n_params)
    system : LieGroupSystem
    constraint : {"space_fixed", "body_fixed"}, optional

    Returns
    -------
    gammadot, mdot : ndarray, shape (..., n)
    """
    n, N = _n_of(system), system.N
    constraint = constraint or constraint_of(system)
    x = np.asarray(states, dtype=float)
    dx = np.broadcast_to(np.asarray(rates, dtype=float), x.shape)
    I_num = numeric_inertia_matrix(system, params)
    xf, If, lead = _lanes(x, I_num, N)
    dxf = dx.reshape(-1, N + n)
    IOm = _skew(np.einsum("lab,lb->la", If, xf[:, :N]), n)
    IOmdot = _skew(np.einsum("lab,lb->la", If, dxf[:, :N]), n)
    if constraint == "space_fixed":
        b, bdot = xf[:, N:], dxf[:, N:]
        mdot = -np.einsum("lij,lj->li", IOmdot, b) - np.einsum("lij,lj->li", IOm, bdot)
    else:
        b = _axis_lanes(system, params, lead)
        mdot = -np.einsum("lij,lj->li", IOmdot, b)
    return dxf[:, N:].reshape(*lead, n).copy(), mdot.reshape(*lead, n)


def lie_from_embedded(
    gamma: Any, m: Any, params: Any, system: LieGroupSystem, constraint: str | None = None
) -> np.ndarray:
    """States ``(Omega_(i,j)..., gamma)`` of ``system`` from embedded ``(gamma, m)``.

    Solves ``K_b v = P_b m`` for ``v`` orthogonal to ``b``, ``K_b v = -P_b I(b ^ v) b`` (SPD on
    ``b^perp``: ``v . K_b v = <I(b ^ v), b ^ v>``), and sets ``Omega = b ^ v``;
    ``b = gamma`` (space fixed) or the body axis (body fixed), ``P_b = 1 - b b^T / |b|^2``.

    Parameters
    ----------
    gamma, m : array_like, shape (..., n)
    params : array_like, shape (n_params,) or (..., n_params)
    system : LieGroupSystem
        From :func:`rigid_body_lie_system`.
    constraint : {"space_fixed", "body_fixed"}, optional
        Default: :func:`constraint_of` ``system``.

    Returns
    -------
    ndarray, shape (..., N + n)
    """
    n, N = _n_of(system), system.N
    constraint = constraint or constraint_of(system)
    gamma = np.asarray(gamma, dtype=float)
    m = np.asarray(m, dtype=float)
    if gamma.shape != m.shape or gamma.shape[-1:] != (n,):
        raise ValueError(f"gamma and m must have the same shape (..., {n})")
    I_num = numeric_inertia_matrix(system, params)
    gf, If, lead = _lanes(gamma, I_num, N)
    mf = m.reshape(-1, n)
    pairs = so_n_pairs(n)
    out = np.empty((gf.shape[0], N + n))
    eye = np.eye(n)
    bf = gf if constraint == "space_fixed" else _axis_lanes(system, params, lead)
    for r in range(gf.shape[0]):
        b = bf[r]
        P = eye - np.outer(b, b) / (b @ b)
        K = np.empty((n, n))
        for k in range(n):
            Om = np.outer(b, eye[k]) - np.outer(eye[k], b)
            K[:, k] = -P @ (_apply_inertia(If[r], Om, n) @ b)
        v = np.linalg.solve(P @ K @ P + np.outer(b, b), P @ mf[r])
        Om = np.outer(b, v) - np.outer(v, b)
        out[r, :N] = [Om[i, j] for i, j in pairs]
        out[r, N:] = gf[r]
    return out.reshape(*lead, N + n)
