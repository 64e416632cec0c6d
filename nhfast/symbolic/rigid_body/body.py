"""Rigid bodies on SO(n) described at matrix level, their equations derived without components.

A body is an inertia operator ``I`` on ``so(n)`` (a SymPy function of the skew matrix ``Om``
and of declared parameters), a potential ``U(gamma)`` of the advected ``gamma = g^T e_n``, and
a constraint ``Omega in b ^ R^n`` -- ``b = gamma`` (space-fixed, right-invariant: the Veselova
or LR family) or ``b = e`` a fixed body vector (left-invariant: the Suslov family); here
``u ^ w = u w^T - w u^T`` and ``<X, Y> = -1/2 tr(X Y)``.

Derivation (Lagrange-d'Alembert in the body frame, ``Omega = b ^ v`` with ``v . b = 0``)::

    Mdot = [M, Omega] + tau + lambda,   M = I(Omega),  tau = grad U ^ gamma,  lambda in D^o
    <X, b ^ u> = -u . (X b)    so  D^o  is  { X : P_b X b = 0 }  (P_b = 1 - b b^T / |b|^2)
    m := -M b  (the momentum: p(u) = <M, b ^ u> = u . m),   m . b = 0
    mdot = -P_b([M, Omega] b + tau b + M bdot) - (bdot . m) b / |b|^2,  bdot = -Omega b or 0
    gammadot = -Omega gamma

and the velocity from the momentum through the reduced metric ``K_b w = -I(b ^ w) b``
(symmetric, ``K_b b = 0``, positive on ``b^perp``): ``(K_b + b b^T) v = P_b m``.  Each of these
is a matrix expression that :mod:`nhfast.symbolic.rigid_body.algebra` expands (with the
symbolic dimension ``n``), so ``[M, Omega] b + M bdot`` is simplified by cancellation of
canonical dot products, not by hand.  The operator ``K_b + b b^T`` is then classified:
diagonal plus low rank (``A Om A``, ``J Om + Om J``, any operator made of diagonal matrices)
gives a closed-form Woodbury solve, ``O(n)`` per lane; a parameter matrix acting on the
unknown (a Hadamard inertia ``H o Om``) gives a dense per-lane solve.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import sympy as sp
from sympy.matrices.expressions import DiagMatrix, MatrixExpr, MatrixSymbol, ZeroMatrix

from nhfast._memory import check as check_memory
from nhfast.codegen.differentiate import jvp_program, with_divergence
from nhfast.codegen.indexed import IndexedProgram
from nhfast.structured_field import StructuredVectorField
from nhfast.symbolic._rational import normal
from nhfast.symbolic.rigid_body.algebra import (
    DIM,
    Lowering,
    Node,
    Scalars,
    VecPoly,
    expand_scalar,
    expand_vector,
    extract,
    gradient,
    leaf,
    substitute,
    substitute_scalar,
)
from nhfast.symbolic.rigid_body.calculus import Calculus
from nhfast.symbolic.rigid_body.solve import (
    RECIPROCAL,
    Velocity,
    bordered_solve,
    kept_terms,
    scales,
)

__all__: list[str] = []

#: Observables of every rigid-body program, in order.
OBSERVABLES = ("energy", "gamma_norm", "momentum_constraint", "log_det_metric")

#: Memory of the program, its compiled kernels and a call's work per state or parameter
#: component (measured: n = 10^5 took 0.6 GB over the interpreter's own).
BYTES_PER_COMPONENT = 3000

#: At most this many rank-one terms get a closed-form (Woodbury) solve.
WOODBURY_MAX_RANK = 4

_KINDS = ("diagonal", "vector", "symmetric", "scalar")
_RESERVED = {"gamma", "m", "v", "w", "e", "rb_dU", "n"}


@dataclass(frozen=True)
class Param:
    """A declared parameter of a rigid body (see :func:`diagonal` and friends)."""

    name: str
    kind: str
    positive: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise ValueError(f"parameter name must be an identifier, got {self.name!r}")
        if self.name in _RESERVED or self.name.startswith("rb_"):
            raise ValueError(f"parameter name {self.name!r} is reserved")
        if self.kind not in _KINDS:
            raise ValueError(f"parameter kind must be one of {_KINDS}, got {self.kind!r}")

    def size(self, n: int) -> int:
        """Entries in the parameter vector."""
        return {"diagonal": n, "vector": n, "symmetric": n * n, "scalar": 1}[self.kind]

    def symbolic(self) -> Any:
        """The object handed to the user's inertia and potential callables."""
        if self.kind == "diagonal":
            return DiagMatrix(MatrixSymbol(self.name, DIM, 1))
        if self.kind == "vector":
            return MatrixSymbol(self.name, DIM, 1)
        if self.kind == "symmetric":
            return MatrixSymbol(self.name, DIM, DIM)
        return sp.Symbol(self.name, real=True, positive=self.positive or None)


def diagonal(name: str, positive: bool = False) -> Param:
    """A diagonal matrix ``DiagMatrix(name)`` of ``n`` parameters ``name1..name<n>``.

    Parameters
    ----------
    name : str
        The parameter's name (an identifier; the entries are ``name1..name<n>``).
    positive : bool
        Declare the entries positive (lets the derivation simplify square roots and signs).

    Returns
    -------
    Param
    """
    return Param(name, "diagonal", positive)


def vector(name: str) -> Param:
    """A column vector of ``n`` parameters.

    Parameters
    ----------
    name : str
        The parameter's name (an identifier).

    Returns
    -------
    Param
    """
    return Param(name, "vector")


def symmetric(name: str) -> Param:
    """A symmetric ``n x n`` parameter matrix (``n*n`` entries, row-major, ``H[i,j] = H[j,i]``
    expected), e.g. one inertia per pair: ``HadamardProduct(H, Om)``.

    Parameters
    ----------
    name : str
        The matrix's name (an identifier); its ``n * n`` entries follow in row-major order.

    Returns
    -------
    Param
        Of kind ``"symmetric"``.
    """
    return Param(name, "symmetric")


def scalar(name: str, positive: bool = False) -> Param:
    """One scalar parameter.

    Parameters
    ----------
    name : str
        The parameter's name (an identifier).
    positive : bool
        Declare it positive.

    Returns
    -------
    Param
    """
    return Param(name, "scalar", positive)


@dataclass(frozen=True)
class Constraint:
    """``Omega in b ^ R^n``: ``space_fixed`` (``b = gamma``) or ``body_fixed`` (``b = e_n``, or
    the declared vector parameter named ``axis``)."""

    kind: str
    axis: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in ("space_fixed", "body_fixed"):
            raise ValueError(f"constraint kind must be space_fixed or body_fixed, got {self.kind}")


def space_fixed() -> Constraint:
    """Right-invariant constraint of the Veselova (LR) family: the angular velocity in space is
    orthogonal to the fixed axis ``e_n``; in the body ``Omega in gamma ^ R^n``."""
    return Constraint("space_fixed")


def body_fixed(axis: str | None = None) -> Constraint:
    """Left-invariant constraint of the Suslov family: ``Omega in e ^ R^n``.

    ``e = e_n`` by default (``Omega_ij = 0`` for ``i < j < n``); ``axis`` names a declared
    :func:`vector` parameter to use instead.  (With ``e`` an eigenvector of the inertia, as
    ``e_n`` is for diagonal ``J Om + Om J``, the free motion is a steady rotation.)

    Parameters
    ----------
    axis : str, optional
        Name of a declared :func:`vector` parameter holding ``e``; default ``e_n``.

    Returns
    -------
    Constraint
    """
    if axis is not None and not isinstance(axis, str):
        raise TypeError(f"axis must be the name of a vector parameter, got {axis!r}")
    return Constraint("body_fixed", axis)


@dataclass
class Derivation:
    """The derived equations, in the symbolic dimension (see the module docstring).

    Attributes
    ----------
    gamma_dot, m_dot : VecPoly
        Right-hand sides, in the vectors ``gamma``, ``m``, ``v`` (the solved velocity) and
        the parameters.
    diag : VecPoly
        Diagonal part of ``K_b + b b^T``.
    rank : list of (VecPoly, Node)
        Rank-one parts ``u z^T``.
    dense : list of (VecPoly, str, Node)
        Parts ``left o H (right o w)``.
    energy : sympy.Expr
        ``1/2 m . v + U``.
    scalars : Scalars
        Registry of the dot products in the expressions.
    """

    b: str
    gamma_dot: VecPoly
    m_dot: VecPoly
    diag: VecPoly
    rank: list[tuple[VecPoly, Node]]
    dense: list[tuple[VecPoly, str, Node]]
    energy: sp.Expr
    scalars: Scalars
    potential: sp.Expr


class RigidBody:
    """A rigid body on SO(n) with a matrix-level inertia, potential and constraint.

    Parameters
    ----------
    n : int
        ``n >= 3``.
    inertia : callable
        ``inertia(Om, *params) -> n x n`` SymPy matrix expression, linear in ``Om`` (the skew
        body angular velocity), symmetric and positive for ``<., .>``.  ``params`` are the
        objects of the declared parameters, in order: ``DiagMatrix`` for :func:`diagonal`,
        ``MatrixSymbol`` for :func:`vector` and :func:`symmetric`, a Symbol for
        :func:`scalar`.  E.g. ``lambda Om, J: J*Om + Om*J`` with ``[diagonal("j")]``.
    params : sequence of Param, optional
    potential : callable or sympy.Expr, optional
        ``U(gamma)`` of the components, as everywhere in nhfast: ``potential([gamma1, ...,
        gamma_n])`` at this ``n``, or an expression in symbols named ``gamma1..gamma_n`` (and
        the parameters' components, by name); its gradient is emitted component by
        component.
    matrix_potential : callable, optional
        The same at matrix level, for any ``n`` in ``O(n)`` code:
        ``matrix_potential(gamma, *params)`` -> a ``1 x 1`` matrix expression
        (``chi.T * gamma``), or a scalar in dot products written ``sp.trace(u.T * w)`` (e.g.
        ``sp.trace(chi.T*gamma) + sp.trace(gamma.T*J*gamma)**2``), numbers and scalar
        parameters (``[0, 0]`` elements are refused: SymPy expands them into index sums).
        Instead of ``potential``.
    constraint : Constraint, optional
        :func:`space_fixed` (default) or :func:`body_fixed`.
    name : str, optional

    Examples
    --------
    >>> from nhfast.symbolic import rigid_body as rb
    >>> body = rb.RigidBody(32, lambda Om, J: J * Om + Om * J, [rb.diagonal("j")])
    >>> prog = body.program()          # an IndexedProgram: rhs, observables, divergence
    >>> prog.n_state, prog.n_params
    (64, 32)
    """

    def __init__(
        self,
        n: int,
        inertia: Callable[..., Any],
        params: Sequence[Param] = (),
        potential: Callable[[list[sp.Symbol]], Any] | sp.Expr | None = None,
        matrix_potential: Callable[..., Any] | None = None,
        constraint: Constraint | None = None,
        name: str | None = None,
        **renamed: Any,
    ) -> None:
        if "component_potential" in renamed:
            raise TypeError(
                "RigidBody: component_potential is now called potential (U of the components "
                "gamma1..gamma_n, as in every constructor of nhfast); the matrix-level "
                "potential(gamma, *params) is now matrix_potential"
            )
        if renamed:
            raise TypeError(f"RigidBody got unexpected keyword arguments {sorted(renamed)}")
        if not isinstance(n, int) or isinstance(n, bool) or n < 3:
            raise ValueError(f"n must be an int >= 3, got {n!r}")
        if not callable(inertia):
            raise TypeError("inertia must be a callable inertia(Om, *params)")
        params = tuple(params)
        for p in params:
            if not isinstance(p, Param):
                raise TypeError(f"params must be Param declarations (rb.diagonal ...), got {p!r}")
        names = [p.name for p in params]
        if len(set(names)) != len(names):
            raise ValueError(f"parameter names repeat: {names}")
        if potential is not None and matrix_potential is not None:
            raise ValueError("give potential or matrix_potential, not both")
        if matrix_potential is not None and not callable(matrix_potential):
            raise TypeError("matrix_potential must be a callable matrix_potential(gamma, *params)")
        constraint = space_fixed() if constraint is None else constraint
        if not isinstance(constraint, Constraint):
            raise TypeError("constraint must be rb.space_fixed() or rb.body_fixed()")
        if constraint.axis is not None and not any(
            p.name == constraint.axis and p.kind == "vector" for p in params
        ):
            raise ValueError(f"axis {constraint.axis!r} is not a declared rb.vector parameter")
        self.n = n
        self.inertia = inertia
        self.params = params
        self.potential = potential
        self.matrix_potential = matrix_potential
        self.constraint = constraint
        self.name = name or f"rigid_body_{constraint.kind}_{n}"
        self._derivation: Derivation | None = None
        self._velocity: Velocity | None = None

    # ------------------------------------------------------------------ derivation ----
    @property
    def symmetric_names(self) -> set[str]:
        """Names of the symmetric parameter matrices."""
        return {p.name for p in self.params if p.kind == "symmetric"}

    def _apply(self, om: MatrixExpr) -> MatrixExpr:
        objs = [p.symbolic() for p in self.params]
        out = self.inertia(om, *objs)
        if not isinstance(out, MatrixExpr) or out.shape != (DIM, DIM):
            raise ValueError(
                f"inertia(Om, ...) must return an n x n matrix expression, got {out!r}"
            )
        return out

    def derive(self) -> Derivation:
        """The equations in the symbolic dimension (cached; independent of ``n``)."""
        if self._derivation is None:
            self._derivation = self._derive()
        return self._derivation

    def _derive(self) -> Derivation:
        space = self.constraint.kind == "space_fixed"
        bname = "gamma" if space else (self.constraint.axis or "e")
        B = MatrixSymbol(bname, DIM, 1)
        G = MatrixSymbol("gamma", DIM, 1)
        V = MatrixSymbol("v", DIM, 1)
        W = MatrixSymbol("w", DIM, 1)
        gauge = leaf(bname, "v")
        scalars = Scalars(zero=lambda node: node == gauge)
        sym = self.symmetric_names

        def vec(e: Any) -> VecPoly:
            return expand_vector(e, scalars, sym)

        b = leaf(bname)
        r2b = scalars.of(leaf(bname, bname))

        def project(y: VecPoly) -> VecPoly:
            return y - VecPoly.of(b, y.dot(b, scalars) / r2b)

        om_v = B * V.T - V * B.T
        om_w = B * W.T - W * B.T
        # the reduced metric plus b b^T, as an operator on the unknown w
        op = vec(-self._apply(om_w) * B) + VecPoly.of(b, scalars.of(leaf(bname, "w")))
        diag, rank, dense = _classify(op, scalars)
        # the potential and its torque
        pot, grad = self._potential(scalars)
        # momentum equation
        M = self._apply(om_v)
        bdot = -om_v * B if space else ZeroMatrix(DIM, 1)
        x = vec(M * (om_v * B) - om_v * (M * B) + M * bdot)
        tau_b = grad.scaled(scalars.of(leaf("gamma", bname))) - VecPoly.of(
            leaf("gamma"), grad.dot(b, scalars)
        )
        m_dot = -project(x + tau_b)
        if space:
            bdot_m = vec(bdot).dot(leaf("m"), scalars)
            m_dot = m_dot - VecPoly.of(b, bdot_m / r2b)
        gamma_dot = vec(-om_v * G)
        energy = sp.Rational(1, 2) * scalars.of(leaf("m", "v")) + pot
        return Derivation(bname, gamma_dot, m_dot, diag, rank, dense, energy, scalars, pot)

    def velocity(self) -> Velocity:
        """The velocity from the momentum, solved in closed form (cached; see
        :func:`nhfast.symbolic.rigid_body.solve.bordered_solve`).

        Raises
        ------
        ValueError
            If the reduced metric needs a dense solve (a matrix acting on the unknown).
        """
        if self._velocity is None:
            d = self.derive()
            if d.dense:
                raise ValueError("the reduced metric needs a dense solve: no closed form")
            invertible = {p.name for p in self.params if p.kind in ("diagonal", "vector")}
            best = None
            for scale in scales(d.diag):
                sol = bordered_solve(d.b, d.diag, d.rank, d.scalars, invertible, scale)
                fields = [substitute(f, "v", sol.w, d.scalars) for f in (d.gamma_dot, d.m_dot)]
                cost = _field_cost(fields)
                if best is None or cost < best[0]:
                    best = (cost, sol)
                if sol.reciprocal is None:  # a closed-form reciprocal: no scale to choose
                    break
            self._velocity = best[1]
        return self._velocity

    def _potential(self, scalars: Scalars) -> tuple[sp.Expr, VecPoly]:
        if self.potential is not None:
            return sp.Symbol("rb_U", real=True), VecPoly.of(leaf("rb_dU"))
        if self.matrix_potential is None:
            return sp.Integer(0), VecPoly()
        objs = [p.symbolic() for p in self.params]
        u = expand_scalar(
            self.matrix_potential(MatrixSymbol("gamma", DIM, 1), *objs),
            scalars,
            self.symmetric_names,
        )
        return u, gradient(u, "gamma", scalars)

    def _component_potential(self, gam: list[sp.Symbol]) -> sp.Expr:
        """``U`` of the components ``gam`` (the user's callable, or expression)."""
        pot = self.potential
        if not callable(pot) or isinstance(pot, sp.Basic):
            return sp.sympify(pot)
        try:
            return sp.sympify(pot(gam))
        except (TypeError, AttributeError, ValueError, sp.SympifyError) as exc:
            raise TypeError(
                f"potential([gamma1, ..., gamma{self.n}]) failed ({exc}): potential receives "
                "the list of components; a matrix-level potential(gamma, *params) goes to "
                "matrix_potential"
            ) from exc

    # ------------------------------------------------------------------- lowering ----
    def program(self) -> IndexedProgram:
        """The derived equations as an indexed program (structured loops over the index).

        States ``gamma_1..gamma_n, m_1..m_n``; parameters in declaration order; outputs
        ``rhs``, ``observables`` (:data:`OBSERVABLES`) and, unless the reduced metric needs a
        dense solve, ``divergence`` (generated by
        :func:`nhfast.codegen.differentiate.with_divergence`, ``O(n)`` per lane).
        """
        d = self.derive()
        n = self.n
        size = n * (2 + sum(p.size(n) / n for p in self.params)) * BYTES_PER_COMPONENT
        check_memory(
            size,
            f"the program of a rigid body at n = {n} (SymPy symbols for its {2 * n} states "
            "and its parameters)",
            "a smaller n",
        )
        prog = IndexedProgram(n)
        handles: dict[str, sp.Symbol] = {}
        gam = list(sp.symbols(f"gamma1:{n + 1}", real=True))
        handles["gamma"] = prog.state_vector("gamma", gam)
        handles["m"] = prog.state_vector("m", list(sp.symbols(f"m1:{n + 1}", real=True)))
        matrices: dict[str, sp.Symbol] = {}
        values: dict[sp.Symbol, sp.Expr] = {}
        for p in self.params:
            if p.kind in ("diagonal", "vector"):
                comps = list(
                    sp.symbols(f"{p.name}1:{n + 1}", real=True, positive=p.positive or None)
                )
                handles[p.name] = prog.param_vector(p.name, comps)
            elif p.kind == "symmetric":
                matrices[p.name] = prog.param_matrix(p.name)
            else:
                values[p.symbolic()] = prog.param_scalar(p.name)
        if d.b == "e":
            handles["e"] = prog.unrolled("rb_axis", [sp.Integer(0)] * (n - 1) + [sp.Integer(1)])
        low = Lowering(prog, handles, matrices, d.scalars, values)
        if self.potential is not None:
            u = self._component_potential(gam)
            # states and parameters by name (whatever assumptions the caller gave its symbols)
            byname = {s.name: s for s in (*gam, *prog.param_symbols)}
            u = u.xreplace({s: byname[s.name] for s in u.free_symbols if s.name in byname})
            extra = u.free_symbols - set(gam) - set(prog.param_symbols)
            if extra:
                names = ", ".join(sorted(map(str, extra)))
                raise ValueError(
                    f"potential may depend on gamma1..gamma{n} and the parameters, found {names}"
                )
            low.handles["rb_dU"] = prog.unrolled("rb_dU", [sp.diff(u, g) for g in gam])
            low.values[sp.Symbol("rb_U", real=True)] = prog.scalar("rb_U", u)
        if d.dense or len(kept_terms(d.b, d.rank)) > WOODBURY_MAX_RANK:
            # v from (K_b + b b^T) v = P_b m, a dense per-lane solve
            r2b = low.scalar(d.scalars.of(leaf(d.b, d.b)))
            bm = low.scalar(d.scalars.of(leaf(d.b, "m")))
            f = prog.vector("rb_f", handles["m"] - (bm / r2b) * handles[d.b])
            v, logdet = _dense_solve(low, d, f)
            low.handles["v"] = v
            gamma_dot, m_dot, energy = d.gamma_dot, d.m_dot, d.energy
            divergence = None
            logdet = logdet - sp.log(r2b)
        else:
            sol = self.velocity()
            if sol.reciprocal is not None:
                low.handles[RECIPROCAL] = prog.vector(RECIPROCAL, 1 / low.vector(sol.reciprocal))
            gamma_dot = substitute(d.gamma_dot, "v", sol.w, d.scalars)
            m_dot = substitute(d.m_dot, "v", sol.w, d.scalars)
            divergence = _divergence(d, sol, gamma_dot, m_dot)
            energy = substitute_scalar(d.energy, "v", sol.w, d.scalars)
            logdet = low.scalar(sol.log_det) + prog.reduce(
                low.name("logD"), sp.log(sp.Abs(low.vector(sol.log_det_sum)))
            )
        blocks = [low.vector(gamma_dot), low.vector(m_dot)]
        for k, blk in enumerate(blocks):
            if not prog.is_indexed(blk):  # a constant component (e.g. mdot = 0): n rows of it
                blocks[k] = prog.vector(low.name("const"), blk + 0 * prog.index)
        prog.output("rhs", blocks)
        gnorm = low.scalar(d.scalars.of(leaf("gamma", "gamma")))
        bm = low.scalar(d.scalars.of(leaf(d.b, "m")))
        prog.output(
            "observables",
            [low.scalar(energy), gnorm, bm, logdet],
            names=OBSERVABLES,
        )
        prog.domain_blocks = [gnorm]  # |gamma|^2 > 0, in the index (see vector_field)
        if divergence is not None:
            prog.output("divergence", [low.scalar(divergence)])
        elif not any(st.kind in ("matvec", "solve") for st in prog.statements):
            # generated by differentiating the program (diagonal plus low-rank Jacobians):
            # O(n) per lane; a dense solve has no such structure (no divergence output)
            prog = with_divergence(prog)
        return prog

    def tangent_program(self) -> IndexedProgram:
        """The program with its tangent (Jacobian-vector product) equations, generated by
        forward-mode differentiation (:func:`nhfast.codegen.differentiate.jvp_program`).

        States ``(gamma, m, d_gamma, d_m)``; integrating it gives ``DPhi_t . dx`` along a
        trajectory (one column of the variational equations per tangent).
        """
        return jvp_program(self.program())

    def vector_field(self) -> StructuredVectorField:
        """The body as a :class:`~nhfast.structured_field.StructuredVectorField`.

        Pass it to :func:`nhfast.integrate`; its domain is ``|gamma| > 0``.
        """
        prog = self.program()
        gam = prog.state_symbols[: self.n]
        domain = {"gamma != 0": sp.Add(*[g**2 for g in gam])}
        return StructuredVectorField(prog, name=self.name, domain=domain)


def _classify(
    op: VecPoly, scalars: Scalars
) -> tuple[VecPoly, list[tuple[VecPoly, Node]], list[tuple[VecPoly, str, Node]]]:
    """Split an operator linear in ``w`` into diagonal, rank-one and dense parts."""
    diag = VecPoly()
    rank: dict[Node, VecPoly] = {}
    dense: list[tuple[VecPoly, str, Node]] = []
    wsyms = {s for s, node in scalars.nodes.items() if "w" in node.names()}
    for node, coef in op.terms.items():
        if "w" in node.names():
            if node.group.count("w") == 1 and node.count("w") == 1:
                diag = diag + VecPoly.of(node.without("w"), coef)
                continue
            hit = [(k, (o, kid)) for k, (o, kid) in enumerate(node.kids) if "w" in kid.group]
            if len(hit) == 1 and hit[0][1][1].count("w") == 1 and node.count("w") == 1:
                k, (o, kid) = hit[0]
                left = Node(node.group, node.kids[:k] + node.kids[k + 1 :])
                dense.append((VecPoly.of(left, coef), o[1], kid.without("w")))
                continue
            raise NotImplementedError(
                "the inertia operator applies a matrix to the unknown more than once; "
                "only diagonal, low-rank and one-matrix terms are supported"
            )
        poly = sp.Poly(sp.expand(coef), *sorted(wsyms, key=str)) if wsyms else None
        if poly is None or poly.total_degree() < 1:
            raise ValueError("the reduced metric has a term without the unknown: not linear")
        for monom, c in poly.terms():
            if sum(monom) != 1:
                raise ValueError("the reduced metric is not linear in the velocity")
            s = sorted(wsyms, key=str)[monom.index(1)]
            for z in extract(scalars.nodes[s], "w"):
                rank[z] = rank.get(z, VecPoly()) + VecPoly.of(node, c)
    rank_list = [(u, z) for z, u in sorted(rank.items()) if u.terms]
    return diag, rank_list, dense


def _field_cost(fields: list[VecPoly]) -> tuple[int, int]:
    """(element-wise products, per-lane coefficients) of evaluating the vectors: the work
    of their Taylor series per order and component, which the solve's scale trades."""
    products = coefs = 0
    for f in fields:
        for node, coef in f.terms.items():
            size = len(node.group) + len(node.kids)
            plain = sp.sympify(coef).is_number
            products += max(size - 1, 0) + (0 if plain else 1)
            coefs += 0 if plain else 1
    return products, coefs


def _divergence(d: Derivation, sol: Velocity, gamma_dot: VecPoly, m_dot: VecPoly) -> Any:
    """``div X = tr d(gammadot)/d(gamma) + tr d(mdot)/dm`` in closed form (dot products), or
    None where the algebra cannot differentiate (a potential given by components on the
    ``gamma`` side, matrix products of the states)."""
    rec = None if sol.reciprocal is None else (RECIPROCAL, sol.reciprocal)
    calc = Calculus(d.scalars, rec, opaque={"rb_dU": {"gamma"}})
    try:
        div = calc.trace(gamma_dot, "gamma") + calc.trace(m_dot, "m")
    except NotImplementedError:
        return None
    return sp.cancel(normal(div))


def _dense_solve(low: Lowering, d: Derivation, f: sp.Symbol) -> tuple[sp.Symbol, sp.Expr]:
    """Emit ``v = (K_b + b b^T)^{-1} f`` as a per-lane dense solve; returns ``(v, log|det|)``."""
    prog = low.prog
    if not d.diag.terms:
        raise ValueError("the reduced metric has no diagonal part; not supported")
    D = prog.vector("rb_D", low.vector(d.diag))
    terms = [(prog.vector(low.name("u"), low.vector(u)), None, low.node(z)) for u, z in d.rank]
    for left, mat, right in d.dense:
        terms.append((low.vector(left), low.matrices[mat], low.node(right)))
    return prog.solve("v", f, diag=D, terms=terms, logdet="rb_logdet")
