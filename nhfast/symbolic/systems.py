"""System descriptions: general nonholonomic systems and G-Chaplygin systems (pure SymPy).

``NonholonomicSystem`` holds ``(Q, G, U, D)``: coordinates ``q``, the kinetic metric ``G(q)``
(``T = 1/2 qdot^T G qdot``), the potential ``U(q)`` and the constraint distribution ``D``, given
either by constraint 1-forms (rows of ``W(q)``, ``D = ker W``) or by a frame (columns spanning D).

``ChaplyginSystem`` adds adapted coordinates ``q = (shape s, group theta)`` of a G-Chaplygin
system (García-Naranjo & Marrero 2020, (3.1)): ``T_qQ = D_q (+) g.q``.  In such coordinates the
splitting holds iff the block ``W_theta`` of the constraint matrix (columns of the group
coordinates) is invertible; then ``hor d/ds^i = d/ds^i + h^alpha_i d/dtheta^alpha`` with
``h = -W_theta^{-1} W_s``.  ``ChaplyginSystem.reduce()`` returns a ``ReducedChaplyginSystem``
(the data on ``T*S``: reduced metric ``K_ij = <<hor d_i, hor d_j>>`` (3.19) and gyroscopic
coefficients ``C^k_ij`` from ``C^k_ij K_kl = <<[hor d_i, hor d_j], hor d_l>>`` (3.6)/(4.15)).

Argument order is always the user's; nothing is derived from ``free_symbols``.

Reference: García-Naranjo & Marrero (2020), "The geometry of nonholonomic Chaplygin systems
revisited".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import sympy as sp
from sympy.core.function import AppliedUndef

from nhfast.symbolic import charts as _ch
from nhfast.symbolic import frames as _fr
from nhfast.symbolic._util import (
    Simplifier,
    as_expr,
    as_matrix,
    as_symbol_list,
    check_declared,
    generic_point,
    generic_rank,
    is_zero,
    numeric_rank,
    simplifier,
)

__all__ = ["NonholonomicSystem", "ChaplyginSystem", "ReducedChaplyginSystem"]


def _check_params(q: list[sp.Symbol], params: Any) -> list[sp.Symbol]:
    ps = as_symbol_list(params, "params", allow_empty=True)
    clash = [p for p in ps if p in set(q)]
    if clash:
        raise ValueError(f"params and q share the symbol(s) {', '.join(map(str, clash))}")
    return ps


def _check_metric(
    metric: Any, n: int, declared: list[sp.Symbol], name: str = "metric"
) -> sp.Matrix:
    g = as_matrix(metric, name)
    if g.shape != (n, n):
        raise ValueError(f"{name} must be a square {n} x {n} matrix, got shape {g.shape}")
    check_declared(g, name, declared)
    for i in range(n):
        for j in range(i + 1, n):
            if not is_zero(g[i, j] - g[j, i]):
                raise ValueError(
                    f"{name} is not symmetric: entry ({i}, {j}) differs from ({j}, {i})"
                )
    _check_positive(g, declared, name)
    return g


def _full_rank_matrix(arg: Any, name: str, n: int, declared: list[sp.Symbol]) -> sp.Matrix:
    """``constraints`` (``k x n``, one row per 1-form, ``1 <= k < n``) or ``frame`` (``n x r``,
    one column per field, ``1 <= r <= n``) as a matrix of full rank at generic points."""
    m = as_matrix(arg, name)
    if name == "constraints":
        size, count, most = m.cols, m.rows, n - 1
        sides, counted, verb = "columns (one row per 1-form)", "rows", "do not"
    else:
        size, count, most = m.rows, m.cols, n
        sides, counted, verb = "rows (one column per field)", "columns", "does not"
    if size != n:
        raise ValueError(f"{name} must have len(q) = {n} {sides}, got {size}")
    if count == 0 or count > most:
        raise ValueError(f"{name} must have between 1 and {most} {counted}, got {count}")
    check_declared(m, name, declared)
    rank = generic_rank(m, declared)
    if rank < count:
        raise ValueError(
            f"{name} {verb} have full rank: rank {rank} < {count} {counted} at generic points"
        )
    return m


def _check_positive(g: sp.Matrix, declared: list[sp.Symbol], name: str) -> None:
    """Raise unless ``g`` is positive definite at a few generic points (a kinetic metric)."""
    for seed in range(3):
        pt = generic_point(declared, seed=seed)
        m = g.subs(pt)
        if m.free_symbols or m.atoms(AppliedUndef):
            # symbols we cannot place (undeclared ones were rejected before), or undefined
            # functions such as F(q1) whose values are unknown: nothing to check numerically
            return
        arr = np.array(m.evalf(30).tolist(), dtype=float)
        eig = np.linalg.eigvalsh(arr)
        scale = max(1.0, float(np.abs(eig).max()))
        where = ", ".join(f"{k}={v}" for k, v in pt.items())
        if abs(eig.min()) <= 1e-12 * scale:
            raise ValueError(f"{name} is singular at the generic point ({where})")
        if eig.min() < 0:
            raise ValueError(
                f"{name} is not positive definite at the generic point ({where}): "
                f"smallest eigenvalue {eig.min():.3g}"
            )


class NonholonomicSystem:
    """A mechanical system with linear nonholonomic constraints.

    Parameters
    ----------
    q : list of sympy.Symbol
        Coordinates ``q^1..q^n`` (their order is kept).
    metric : sympy.Matrix
        Symmetric ``n x n`` kinetic metric ``G(q)``; kinetic energy ``1/2 qdot^T G qdot``.
    potential : sympy.Expr, optional
        Potential energy ``U(q)`` (default 0).
    constraints : sympy.Matrix, optional
        ``k x n`` matrix ``W(q)`` of constraint 1-forms (rows); ``D = ker W``.  Must have full
        row rank ``k`` at generic points.
    frame : sympy.Matrix, optional
        ``n x r`` matrix whose columns span ``D``; full column rank.  Exactly one of
        ``constraints`` / ``frame`` may be given; with neither, ``D = TQ``.
    params : list of sympy.Symbol, optional
        Parameters (masses, lengths, ...).  Every free symbol of ``metric``, ``potential``,
        ``constraints`` and ``frame`` must be in ``q`` or ``params``.
    simplify : bool or callable, optional
        Simplifier used when building the frame and the default for the geometric methods
        (True: ``cancel``/``simplify``; a callable for domain-specific normal forms).
    dependent : list of sympy.Symbol, optional
        With ``constraints``: the ``k`` dependent coordinates of the coordinate frame (their
        block of ``W`` must be generically invertible).  Default: chosen as described below.

    Raises
    ------
    TypeError
        If an argument has the wrong type (names the argument).
    ValueError
        Wrong shape, non-symmetric metric, rank-deficient constraints/frame, undeclared symbols,
        an unknown ``frame`` name, a ``dependent`` set that is not ``k`` coordinates with a
        generically invertible block, or ``frame="regular"`` for constraints that have no
        regular frame in closed form.

    Notes
    -----
    With ``constraints``, ``frame`` may name the frame of ``D = ker W`` to build:

    * ``"coordinates"`` (default): ``e = [I; -W_dep^{-1} W_free]`` (rows reordered to ``q``),
      so that the quasi-velocities are the velocities of the free coordinates.  The dependent
      coordinates are ``dependent``, or else the last ``k`` coordinates of ``q`` whose columns
      of ``W`` form a generically invertible block.  The frame is singular where
      ``det W_dep = 0``.
    * ``"regular"``: for one constraint row ``w`` with exactly two entries ``a, b`` that are not
      identically zero (``a dq^i + b dq^j = 0``, e.g. a knife edge), the normalised complement
      ``(b d/dq^i - a d/dq^j) / sqrt(a^2 + b^2)`` and the other coordinate fields: singular
      only where ``a = b = 0`` (nowhere when ``a^2 + b^2`` is constant).

    ``frame_domain`` holds the singular set of the frame (given or built) as ``domain``
    conditions: ``sp.Ne(det W_dep, 0)`` (``det W_dep != 0``, the side of the start is kept by
    ``integrate``), ``a^2 + b^2 > 0`` for the regular frame, and for a given frame the
    nonvanishing of the denominators of its entries and of its Gram determinant.  The
    equations of motion built from the system carry it, so ``integrate`` stops a trajectory
    that reaches it with status ``"left_domain"``, naming the condition.
    """

    def __init__(
        self,
        q: Sequence[sp.Symbol],
        metric: Any,
        potential: Any = 0,
        constraints: Any = None,
        frame: Any = None,
        params: Sequence[sp.Symbol] = (),
        simplify: Simplifier = True,
        dependent: Sequence[sp.Symbol] | None = None,
    ) -> None:
        self.simplify: Simplifier = simplify
        simplifier(simplify)  # validates the argument
        self.q: list[sp.Symbol] = as_symbol_list(q, "q")
        self.params: list[sp.Symbol] = _check_params(self.q, params)
        declared = self.q + self.params
        n = len(self.q)
        self.metric: sp.Matrix = _check_metric(metric, n, declared)
        self.potential: sp.Expr = as_expr(potential, "potential")
        check_declared(self.potential, "potential", declared)
        kind = _ch.frame_kind(frame, constraints, dependent)
        if constraints is not None and kind is None:
            raise ValueError("give either constraints (1-forms) or frame (spanning D), not both")
        self.constraint_forms: sp.Matrix | None = None
        #: Dependent coordinates of the coordinate frame (None for other frames).
        self.dependent: list[sp.Symbol] | None = None
        #: The frame's singular set as ``domain`` conditions (see Notes).
        self.frame_domain: dict[str, Any] = {}
        simp = simplifier(simplify)
        if constraints is not None:
            w = _full_rank_matrix(constraints, "constraints", n, declared)
            self.constraint_forms = w
            if kind == "regular":
                self.frame: sp.Matrix = _ch.regular_frame(w, self.q, simp)
                self.frame_domain = _ch.regular_domain(w, self.q, simp)
            else:
                dep = _ch.dependent_columns(w, self.q, declared, dependent)
                self.dependent = [self.q[a] for a in dep]
                self.frame = _ch.coordinate_frame(w, dep, simp)
                self.frame_domain = _ch.block_domain(w, dep, self.q, simp, self.frame)
        elif frame is not None:
            self.frame = _full_rank_matrix(frame, "frame", n, declared)
            self.frame_domain = _ch.given_frame_domain(self.frame, self.q, simp)
        else:
            self.frame = sp.eye(n)

    # -- basic data -----------------------------------------------------------------------
    @property
    def dim(self) -> int:
        """Dimension ``n`` of the configuration space."""
        return len(self.q)

    @property
    def rank(self) -> int:
        """Rank ``r`` of the constraint distribution D."""
        return int(self.frame.cols)

    # -- geometry -------------------------------------------------------------------------
    def _simp(self, simplify: Simplifier | str) -> Simplifier:
        return self.simplify if simplify == "default" else simplify  # type: ignore[return-value]

    def reduced_metric(self, simplify: Simplifier | str = "default") -> sp.Matrix:
        """``K_ij = <<e_i, e_j>>`` for the frame ``e`` of D (see :func:`frames.reduced_metric`)."""
        return _fr.reduced_metric(self.metric, self.frame, simplify=self._simp(simplify))

    def projector(self, simplify: Simplifier | str = "default") -> sp.Matrix:
        """Metric-orthogonal projector onto D (see :func:`frames.orthogonal_projector`)."""
        return _fr.orthogonal_projector(self.metric, self.frame, simplify=self._simp(simplify))

    def bracket_pairings(self, simplify: Simplifier | str = "default") -> sp.MutableDenseNDimArray:
        """``B[i, j, l] = <<[e_i, e_j], e_l>>``."""
        return _fr.bracket_pairings(self.metric, self.frame, self.q, simplify=self._simp(simplify))

    def constraint_coefficients(
        self, simplify: Simplifier | str = "default"
    ) -> sp.MutableDenseNDimArray:
        """``C[i, j, k] = C^k_ij`` with ``P[e_i, e_j] = C^k_ij e_k``."""
        return _fr.constraint_coefficients(
            self.metric, self.frame, self.q, simplify=self._simp(simplify)
        )

    def chart_domain(self, at: Mapping[sp.Symbol, Any] | None = None) -> dict[str, Any]:
        """The frame's singular set as ``domain`` conditions (``frame_domain``), with ``at``
        substituted; conditions that become constants are dropped (no singular set there).

        Returns
        -------
        dict
            ``{label: condition}``: ``sp.Ne(expr, 0)`` for ``expr != 0`` or ``expr`` for
            ``expr > 0``.
        """
        out = {}
        for label, cond in self.frame_domain.items():
            c = cond.subs(dict(at)) if at else cond
            expr = c.args[0] if isinstance(c, sp.Ne) else c
            if isinstance(c, sp.Expr | sp.Ne) and sp.sympify(expr).free_symbols & set(self.q):
                out[label] = c
        return out

    def completed_frame(self) -> sp.Matrix:
        """Square frame ``[e_1..e_r, d/dq^a ...]``: the frame of D completed by coordinate fields.

        The coordinate fields are chosen (in the order of ``q``) so that the result is
        generically invertible.
        """
        e = self.frame
        declared = self.q + self.params
        pt = generic_point(declared, seed=5)
        cols = [e[:, i] for i in range(e.cols)]
        for a in range(self.dim):
            if len(cols) == self.dim:
                break
            trial = sp.Matrix.hstack(*cols, sp.eye(self.dim)[:, a])
            if numeric_rank(trial, pt) == trial.cols:
                cols.append(sp.eye(self.dim)[:, a])
        return sp.Matrix.hstack(*cols)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(q={self.q}, rank={self.rank}, params={self.params})"


@dataclass
class ReducedChaplyginSystem:
    """Reduced data of a G-Chaplygin system on ``T*S`` (García-Naranjo & Marrero 2020, Section 3).

    Attributes
    ----------
    s : list of sympy.Symbol
        Shape coordinates ``s^1..s^r``.
    K : sympy.Matrix
        Reduced metric ``K_ij(s)`` (3.19).
    C : sympy.NDimArray
        Gyroscopic coefficients, ``C[i, j, k] = C^k_ij(s)`` (3.6).
    potential : sympy.Expr
        Reduced potential ``U(s)``.
    params : list of sympy.Symbol
        Parameters.
    name : str
        Label.
    extra : dict
        Free-form extra data (e.g. ``{"gamma": [...]}`` for Veselova).
    """

    s: list
    K: sp.Matrix
    C: Any
    potential: sp.Expr = sp.Integer(0)
    params: list = field(default_factory=list)
    name: str = ""
    extra: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.s = as_symbol_list(self.s, "s")
        self.params = _check_params(self.s, self.params)
        r = len(self.s)
        declared = self.s + self.params
        self.K = _check_metric(self.K, r, declared, name="K")
        self.potential = as_expr(self.potential, "potential")
        check_declared(self.potential, "potential", declared)
        if not isinstance(self.C, sp.NDimArray):
            try:
                self.C = sp.MutableDenseNDimArray(self.C)
            except (TypeError, ValueError) as exc:
                raise TypeError(f"C must be a SymPy array of shape (r, r, r): {exc}") from exc
        if tuple(self.C.shape) != (r, r, r):
            raise ValueError(f"C must have shape ({r}, {r}, {r}), got {tuple(self.C.shape)}")
        check_declared(self.C, "C", declared)

    @property
    def rank(self) -> int:
        """Dimension ``r`` of the shape space."""
        return len(self.s)


class ChaplyginSystem(NonholonomicSystem):
    """A G-Chaplygin system in adapted coordinates ``q = (shape, group)``.

    Parameters
    ----------
    q : list of sympy.Symbol
        All coordinates.
    metric, potential, params
        As for :class:`NonholonomicSystem`.
    constraints : sympy.Matrix
        ``k x n`` constraint 1-forms with ``k = len(group)`` (``dim G = n - r``).
    shape : list of sympy.Symbol
        Shape coordinates ``s^i`` (a subset of ``q``, ``r = len(shape)``).
    group : list of sympy.Symbol, optional
        Group (fibre) coordinates; default: the coordinates of ``q`` not in ``shape``.

    Raises
    ------
    ValueError
        If the splitting ``T_qQ = D_q (+) g.q`` fails: wrong number of constraints, or the block
        of ``constraints`` in the group columns is singular (generically or identically); or if
        the potential depends on the group coordinates.

    Notes
    -----
    The splitting is checked at generic points; the symbolic determinant of the group block is
    stored in ``splitting_determinant`` (for small ``k``): where it vanishes the coordinates are
    not adapted (e.g. the Chaplygin sleigh with ``G`` = x-translations at ``sin(theta) = 0``).
    """

    def __init__(
        self,
        q: Sequence[sp.Symbol],
        metric: Any,
        potential: Any = 0,
        constraints: Any = None,
        shape: Sequence[sp.Symbol] | None = None,
        group: Sequence[sp.Symbol] | None = None,
        params: Sequence[sp.Symbol] = (),
        simplify: Simplifier = True,
    ) -> None:
        if constraints is None:
            raise ValueError("ChaplyginSystem needs constraints (k x n matrix of 1-forms)")
        if shape is None:
            raise ValueError("ChaplyginSystem needs shape (list of shape coordinates)")
        qs = as_symbol_list(q, "q")
        sh = as_symbol_list(shape, "shape")
        missing = [s for s in sh if s not in qs]
        if missing:
            raise ValueError(f"shape contains {', '.join(map(str, missing))}, which is not in q")
        rest = [a for a in qs if a not in sh]
        if group is None:
            grp = rest
        else:
            grp = as_symbol_list(group, "group")
            if set(grp) != set(rest) or len(grp) != len(rest):
                raise ValueError(
                    "group must be the coordinates of q not in shape "
                    f"({', '.join(map(str, rest))}), "
                    f"got {', '.join(map(str, grp))}"
                )
        if not grp:
            raise ValueError("group is empty: a Chaplygin system needs dim G >= 1")
        w = as_matrix(constraints, "constraints")
        if w.rows != len(grp):
            raise ValueError(
                f"splitting T_qQ = D + g.q fails: {w.rows} constraint(s) but "
                f"dim G = len(group) = {len(grp)} "
                f"(need rank D = len(shape) = {len(sh)})"
            )
        super().__init__(qs, metric, potential, constraints=w, params=params, simplify=simplify)
        self.shape: list[sp.Symbol] = sh
        self.group: list[sp.Symbol] = grp
        ig = [qs.index(a) for a in grp]
        ish = [qs.index(a) for a in sh]
        wg = w[:, ig]
        declared = self.q + self.params
        if generic_rank(wg, declared) < len(grp):
            raise ValueError(
                "splitting T_qQ = D + g.q fails: the constraints restricted to the group "
                "velocities "
                f"({', '.join(map(str, grp))}) are singular, i.e. D contains group directions"
            )
        simp = simplifier(simplify)
        self.splitting_determinant: sp.Expr | None = simp(wg.det()) if len(grp) <= 3 else None
        self.dependent = list(grp)
        if self.potential.free_symbols & set(grp):
            raise ValueError(
                "potential depends on group coordinate(s) "
                f"{', '.join(sorted(str(a) for a in self.potential.free_symbols & set(grp)))}; "
                "a Chaplygin system needs a G-invariant potential U(s)"
            )
        # horizontal lifts hor d/ds^i = d/ds^i + h^alpha_i d/dtheta^alpha, h = -W_g^{-1} W_s
        h = wg.LUsolve(-w[:, ish])
        hor = sp.zeros(self.dim, len(sh))
        for c, a in enumerate(ish):
            hor[a, c] = 1
        for row, a in enumerate(ig):
            for c in range(len(sh)):
                hor[a, c] = simp(h[row, c])
        self.frame = hor
        self.frame_domain = self.chart_domain()

    def horizontal_lifts(self) -> sp.Matrix:
        """``n x r`` matrix whose column ``i`` is ``hor d/ds^i``."""
        return self.frame

    def reduce(
        self, simplify: Simplifier | str = "default", at: Mapping[sp.Symbol, Any] | None = None
    ) -> ReducedChaplyginSystem:
        """Reduced metric and gyroscopic coefficients on ``T*S``.

        Parameters
        ----------
        simplify : bool or callable, optional
            Simplification used throughout (default: the one given to the constructor).
        at : dict, optional
            Values substituted for coordinates *after* all derivatives are taken.  Group
            coordinates: needed when the coordinate expressions of K, B depend on them
            (non-abelian G); G-invariance makes the result independent of the chosen fibre
            point.  Shape coordinates may be included too, which gives K and C at one point
            of S (useful for checks on large systems).

        Returns
        -------
        ReducedChaplyginSystem

        Raises
        ------
        ValueError
            If K or C still depend on a group coordinate (and no ``at`` is given).
        """
        simp = simplifier(self._simp(simplify))
        k = self.reduced_metric(simplify=False)
        b = self.bracket_pairings(simplify=False)
        if at:
            gp = dict(at)
            bad = [a for a in gp if a not in self.q]
            if bad:
                raise ValueError(f"at: keys must be coordinates in q, got {bad}")
            k = k.subs(gp)
            b = b.applyfunc(lambda x: sp.sympify(x).subs(gp))
        k = k.applyfunc(simp)
        b = b.applyfunc(simp)
        for obj, name in ((k, "K"), (b, "B")):
            dep = set(obj.free_symbols) & set(self.group)
            if dep:
                raise ValueError(
                    f"reduced {name} depends on group coordinate(s) "
                    f"{', '.join(sorted(map(str, dep)))}; "
                    "the system is not G-invariant in these coordinates, or pass at={...}"
                )
        c = _fr.coefficients_from_pairings(k, b, simplify=simp)
        extra: dict[str, Any] = {"hor": self.frame}
        domain = self.chart_domain(at)
        if domain:
            extra["domain"] = domain
        return ReducedChaplyginSystem(
            s=self.shape,
            K=k,
            C=c,
            potential=self.potential,
            params=self.params,
            name=type(self).__name__,
            extra=extra,
        )

    def chart_domain(self, at: Mapping[sp.Symbol, Any] | None = None) -> dict[str, sp.Expr]:
        """Where the adapted coordinates hold, as a ``domain`` for the reduced equations.

        The splitting ``T_qQ = D (+) g.q`` fails where ``det W_g`` (``splitting_determinant``)
        vanishes, e.g. at ``sin(theta) = 0`` for the Chaplygin sleigh with ``G`` =
        x-translations; there ``K`` and ``C`` blow up.  The condition is
        ``sp.Ne(det W_g, 0)`` (labelled with the determinant), a function of the shape
        coordinates and params; ``integrate`` rejects initial states on the singular locus and
        stops a trajectory that reaches it (status ``"left_domain"``), naming it.

        Parameters
        ----------
        at : dict, optional
            As for :meth:`reduce` (substituted into the determinant).

        Returns
        -------
        dict
            ``{label: sp.Ne(det W_g, 0)}`` (for ``dim G > 3``: the product of the
            denominators of the horizontal lifts ``!= 0``), or empty when it does not depend
            on the shape coordinates (no singular locus in the chart), or still depends on
            group coordinates (no condition on the reduced space).
        """
        det = self.splitting_determinant
        if det is None:  # dim G > 3: the denominators of the horizontal lifts
            dens = _ch.denominators(list(self.frame), self.q)
            if not dens:
                return {}
            prod = sp.sympify(sp.Mul(*dens)).subs(dict(at or {}))
            free = prod.free_symbols
            if not (free & set(self.shape)) or not free <= set(self.shape) | set(self.params):
                return {}
            return {f"Chaplygin chart: denominators of the lifts {prod} != 0": sp.Ne(prod, 0)}
        det = sp.sympify(det).subs(dict(at or {}))
        free = det.free_symbols
        if not (free & set(self.shape)) or not free <= set(self.shape) | set(self.params):
            return {}
        return {f"Chaplygin chart: splitting det W_g = {det} != 0": sp.Ne(det, 0)}
