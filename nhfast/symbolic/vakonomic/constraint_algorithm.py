"""The Dirac-Bergmann constraint algorithm, ``h_2`` on ``M_2`` and the vakonomic bracket.

Martínez, Cortés & de León (2000), "The geometrical theory of constraints applied to the
dynamics of vakonomic mechanical systems: the vakonomic bracket", Sections III, V and VII
("Martínez et al. (2000)" below).  On
``T*P`` with primary constraints ``phi_k`` the consistency conditions
``{c, H} + u^k {c, phi_k} = 0`` are imposed until ``M_{k+1} = M_k``.  Vakonomic case:
``P = Q x R^m``, ``calL = L + lambda^i W_i(qdot)``,
``h_1 = 1/2 (phat - W^T lambda)^T g^{-1} (phat - W^T lambda) + U`` (the paper prints ``+U+U``);
the algorithm stops at step 2 with ``lambda = D^{-1} W g^{-1} phat``, ``D = W g^{-1} W^T`` (13).
The vakonomic bracket (Def. VII.2) is the canonical bracket in the Darboux coordinates
``(q, phat)`` of ``(M_2, omega_2)`` (equal to the Dirac bracket, Prop. VII.1); the printed
formula (18), read literally, is wrong, and
:meth:`VakonomicHamiltonian.printed_bracket_18` evaluates it only so that tests show the
difference.  The Lagrangian side of Section IV and VI: :func:`presymplectic_form`
(``omega_calL``, ``E_calL`` and the kernel ``{Z_i, d/dlambdadot^i}``) and
:func:`sode_multiplier_rates` (``D^i = Gamma(B^i)`` on ``S = {lambdadot = B}``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import sympy as sp

from nhfast.errors import ConstraintAlgorithmError
from nhfast.symbolic._util import (
    Simplifier,
    as_expr,
    as_symbol_list,
    fresh_symbols,
    generic_point,
    generic_rank,
    is_zero,
    numeric_rank,
    simplifier,
)
from nhfast.symbolic.vakonomic._forms import (
    check_system,
    constraint_one_forms,
    is_integrable,
    taken_names,
    velocity_symbols,
)
from nhfast.symbolic.vakonomic.equations import vakonomic_equations
from nhfast.vectorfield import HamiltonianSystem, LinearSolve, VectorField

__all__ = [
    "ConstraintAlgorithmResult",
    "dirac_bergmann",
    "VakonomicHamiltonian",
    "vakonomic_hamiltonian",
    "PresymplecticForm",
    "presymplectic_form",
]


def poisson_bracket(
    f: Any, g: Any, coordinates: Sequence[sp.Symbol], momenta: Sequence[sp.Symbol]
) -> sp.Expr:
    """Canonical bracket ``{f, g} = sum df/dx dg/dp - df/dp dg/dx``."""
    f, g = sp.sympify(f), sp.sympify(g)
    return sp.Add(
        *[
            sp.diff(f, x) * sp.diff(g, p) - sp.diff(f, p) * sp.diff(g, x)
            for x, p in zip(coordinates, momenta, strict=True)
        ]
    )


@dataclass
class ConstraintAlgorithmResult:
    """Outcome of :func:`dirac_bergmann`.

    Attributes
    ----------
    stages : list of list of sympy.Expr
        Constraints found at each step; ``stages[0]`` are the primary ones (``M_1``).
    stop_step : int
        ``k`` with ``M_{k+1} = M_k``: the final manifold is ``M_k``.
    solution : dict
        Variables eliminated on the final manifold, ``{symbol: expression}`` in the remaining
        variables (an explicit description of the final constraint submanifold).
    final_dimension : int
        Dimension of the final constraint submanifold.
    multipliers_determined : bool
        Whether the consistency conditions fix the multipliers ``u`` of the primary
        constraints (rank of ``A_{c k} = {c, phi_k}`` equals the number of primaries).
    multiplier_values : list of sympy.Expr or None
        The multipliers on the final manifold when determined and requested
        (``solve_multipliers=True``).
    constraint_matrix : sympy.Matrix
        ``({c_a, c_b})`` over all constraints, on the final manifold (not simplified).
    second_class : bool
        True when ``constraint_matrix`` is (generically) invertible: all constraints second class.
    """

    stages: list[Any]
    stop_step: int
    solution: dict[Any, Any]
    final_dimension: int
    multipliers_determined: bool
    multiplier_values: list[Any] | None
    constraint_matrix: sp.Matrix
    second_class: bool
    constraints: list[Any] = field(default_factory=list)

    def summary(self) -> str:
        """One sentence: where it stopped and what is determined."""
        det = "determined" if self.multipliers_determined else "not determined"
        cls = "all second class" if self.second_class else "some first class"
        return (
            f"stops at step {self.stop_step} (M_{self.stop_step + 1} = M_{self.stop_step}); "
            f"final manifold of dimension {self.final_dimension}; multipliers {det}; "
            f"constraints {cls}"
        )


class _Reducer:
    """Keeps the eliminated variables and reduces expressions onto the current set."""

    def __init__(
        self, variables: list[Any], candidates: list[Any], params: list[Any], simp: Any
    ) -> None:
        self.variables = variables
        self.candidates = list(candidates)
        self.params = params
        self.solution: dict[sp.Symbol, sp.Expr] = {}
        self.simp = simp

    def on(self, expr: Any) -> sp.Expr:
        return self.simp(sp.sympify(expr).subs(self.solution))

    def eliminate(self, new: list[sp.Expr], step: int) -> list[sp.Expr]:
        free = [c for c in self.candidates if c not in self.solution]
        pt = generic_point(self.variables + self.params, seed=3)
        # independent subset of the new constraints and the variables to solve them for
        jac = sp.Matrix(new).jacobian(free) if free else sp.zeros(len(new), 0)
        rows: list[int] = []
        for i in range(len(new)):
            trial = rows + [i]
            if free and numeric_rank(jac[trial, :], pt) == len(trial):
                rows = trial
        if len(rows) < len(new):
            names = ", ".join(map(str, free)) or "(none left)"
            bad = [new[i] for i in range(len(new)) if i not in rows]
            dep = all(
                generic_rank(
                    sp.Matrix([*[new[i] for i in rows], b]).jacobian(self.variables),
                    self.variables + self.params,
                )
                == len(rows)  # fmt: skip
                for b in bad
            )
            if not dep or not rows:
                raise ConstraintAlgorithmError(
                    f"step {step}: the new constraints {bad} cannot be solved for {names}: "
                    "the matrix of their derivatives is singular where the algorithm needs it "
                    "invertible (e.g. D = W g^-1 W^T of Martínez et al. 2000, (13))"
                )
        chosen: list[sp.Symbol] = []
        sub = jac[rows, :]
        for c in range(len(free)):
            trial = chosen + [free[c]]
            cols = [free.index(s) for s in trial]
            if numeric_rank(sub[:, cols], pt) == len(trial):
                chosen = trial
            if len(chosen) == len(rows):
                break
        sols = sp.solve([new[i] for i in rows], chosen, dict=True)
        if not sols:
            raise ConstraintAlgorithmError(
                f"step {step}: the constraints {[new[i] for i in rows]} have no solution "
                f"for {chosen}: the constraint set is empty"
            )
        sol = {k: self.simp(v) for k, v in sols[0].items()}
        self.solution = {k: self.simp(v.subs(sol)) for k, v in self.solution.items()}
        self.solution.update(sol)
        return [new[i] for i in rows]


def _nonzero_at(expr: sp.Expr, point: dict[Any, Any]) -> bool:
    """True when ``expr`` is certainly not identically zero: its value at ``point`` (30 digits)
    is clearly nonzero.  False means "unknown" (the caller then decides symbolically)."""
    try:
        val = complex(sp.sympify(expr).xreplace(point).evalf(30))
    except (TypeError, ValueError, ZeroDivisionError):
        return False
    return abs(val) > 1e-15


def dirac_bergmann(
    H: Any,
    coordinates: Sequence[sp.Symbol],
    momenta: Sequence[sp.Symbol],
    primary: Sequence[Any],
    params: Sequence[sp.Symbol] = (),
    solve_for: Sequence[sp.Symbol] | None = None,
    max_steps: int | None = None,
    simplify: Simplifier = True,
    solve_multipliers: bool = False,
) -> ConstraintAlgorithmResult:
    """Run the constraint algorithm for ``H`` with primary constraints on a cotangent bundle.

    Parameters
    ----------
    H : sympy.Expr
        Hamiltonian (the canonical one, ``h_1`` for the vakonomic problem).
    coordinates, momenta : list of sympy.Symbol
        Canonical pairs.
    primary : list of sympy.Expr
        Primary constraints ``phi_k = 0``.
    params : list of sympy.Symbol, optional
    solve_for : list of sympy.Symbol, optional
        Variables the constraints may be solved for, in order of preference (default: all
        phase-space variables, momenta first).  If a new constraint cannot be solved for
        them, :class:`ConstraintAlgorithmError` is raised.
    max_steps : int, optional
        Largest admissible stopping step (default: the phase-space dimension, the bound of
        the theory).
    simplify : bool or callable
    solve_multipliers : bool
        Also solve the consistency conditions for the multipliers symbolically (can be slow).

    Returns
    -------
    ConstraintAlgorithmResult

    Raises
    ------
    ConstraintAlgorithmError
        If the algorithm does not stop within ``max_steps`` steps, a constraint is a nonzero
        constant (empty final set), or a new constraint cannot be solved for ``solve_for``.
    """
    xs = as_symbol_list(coordinates, "coordinates")
    ps = as_symbol_list(momenta, "momenta")
    if len(xs) != len(ps):
        raise ValueError(f"coordinates and momenta differ in length: {len(xs)} != {len(ps)}")
    pars = as_symbol_list(params, "params", allow_empty=True)
    H = as_expr(H, "H")
    prim = [as_expr(c, "primary") for c in primary]
    if not prim:
        raise ValueError("primary must hold at least one constraint")
    variables = [*xs, *ps]
    dim = len(variables)
    if max_steps is None:
        max_steps = dim
    if not isinstance(max_steps, int) or max_steps < 1:
        raise ValueError(f"max_steps must be a positive integer, got {max_steps!r}")
    cand = list(solve_for) if solve_for is not None else [*ps, *xs]
    cand = as_symbol_list(cand, "solve_for")
    simp = simplifier(simplify)
    red = _Reducer(variables, cand, pars, simp)

    def br(f: Any, g: Any) -> sp.Expr:
        return poisson_bracket(f, g, xs, ps)

    pt_check = generic_point(variables + pars, seed=11)
    stages: list[list[sp.Expr]] = [red.eliminate([simp(c) for c in prim], 1)]
    step = 1
    while True:
        allc = [c for st in stages for c in st]
        A = sp.Matrix([[red.on(br(c, pk)) for pk in prim] for c in allc])
        # right-hand sides are reduced but simplified only where a new constraint is tested
        b = sp.Matrix([sp.sympify(br(c, H)).subs(red.solution) for c in allc])
        new = []
        for nu in A.T.nullspace(simplify=True):
            c = red.on((nu.T * b)[0, 0])
            if not _nonzero_at(c, pt_check) and is_zero(c):
                continue
            if c.is_number:
                raise ConstraintAlgorithmError(
                    f"step {step + 1}: consistency requires {c} = 0: the constraint set is empty "
                    "(inconsistent equations)"
                )
            new.append(c)
        if not new:
            break
        step += 1
        if step > max_steps:
            raise ConstraintAlgorithmError(
                f"the constraint algorithm did not stop within max_steps={max_steps} steps "
                f"(step {step} still adds {new})"
            )
        stages.append(red.eliminate(new, step))
    allc = [c for st in stages for c in st]
    pt = generic_point(variables + pars, seed=7)
    rankA = numeric_rank(A, pt)
    determined = rankA == len(prim)
    values = None
    if determined and solve_multipliers:
        rows: list[int] = []
        for a in range(A.rows):
            if numeric_rank(A[rows + [a], :], pt) == len(rows) + 1:
                rows.append(a)
        values = [simp(e) for e in A[rows, :].LUsolve(-b[rows, :])]
    cm = sp.Matrix(
        len(allc), len(allc), lambda a, c: sp.sympify(br(allc[a], allc[c])).subs(red.solution)
    )
    second = numeric_rank(cm, pt) == len(allc)
    return ConstraintAlgorithmResult(
        stages=stages,
        stop_step=step,
        solution=dict(red.solution),
        final_dimension=dim - len(red.solution),
        multipliers_determined=determined,
        multiplier_values=values,
        constraint_matrix=cm,
        second_class=second,
        constraints=allc,
    )


@dataclass
class VakonomicHamiltonian:
    """Hamiltonian description of the vakonomic problem (Martínez et al. 2000, Secs. V-VII).

    Attributes
    ----------
    q, p_hat, lam, p_lam : list of sympy.Symbol
        Canonical coordinates ``(q, lambda; phat, p_lambda)`` of ``T*P``.
    p : list of sympy.Symbol
        Momenta of ``T*Q`` (arguments of observables for :meth:`vakonomic_bracket`).
    params : list of sympy.Symbol
    W : sympy.Matrix
        Constraint 1-forms (``m x n``).
    h1 : sympy.Expr
        Hamiltonian on ``M_1``.
    chi : list of sympy.Expr
        Secondary constraints ``chi_i = -dh_1/dlambda^i``.
    D : sympy.Matrix
        ``W g^{-1} W^T`` (13).
    lam_on_M2 : list of sympy.Expr
        ``lambda(q, phat)`` on the final manifold.
    h2 : sympy.Expr
        Hamiltonian on ``(M_2, omega_2)`` in the Darboux coordinates ``(q, phat)``.
    algorithm : ConstraintAlgorithmResult
    integrable : bool
        D is involutive (holonomic constraints): then NH and VAK motions coincide.
    """

    q: list[Any]
    p_hat: list[Any]
    lam: list[Any]
    p_lam: list[Any]
    p: list[Any]
    params: list[Any]
    W: sp.Matrix
    metric: sp.Matrix
    potential: sp.Expr
    h1: sp.Expr
    chi: list[Any]
    D: sp.Matrix
    lam_on_M2: list[Any]
    h2: sp.Expr
    algorithm: ConstraintAlgorithmResult
    integrable: bool
    simplify: Any = None
    _pi_tilde: list[Any] | None = field(default=None, init=False, repr=False, compare=False)

    # -- brackets ---------------------------------------------------------------------------
    def _simp(self, e: Any) -> sp.Expr:
        return simplifier(self.simplify if self.simplify is not None else True)(e)

    def on_M2(self, expr: Any) -> sp.Expr:
        """Restrict a function on ``T*P`` to ``M_2`` (``lambda = lambda(q, phat)``, ``p_lambda
        = 0``), as a function of ``(q, phat)``."""
        sub = dict(zip(self.lam, self.lam_on_M2, strict=True))
        sub.update({s: 0 for s in self.p_lam})
        return self._simp(sp.sympify(expr).subs(sub))

    def bracket(self, f: Any, g: Any) -> sp.Expr:
        """Canonical bracket on ``T*P`` (Martínez et al. 2000, Section VII)."""
        return poisson_bracket(f, g, [*self.q, *self.lam], [*self.p_hat, *self.p_lam])

    def constraint_functions(self) -> list[sp.Expr]:
        """``(p_lambda_1..m, chi_1..m)``, the second-class constraints of ``M_2``."""
        return [*self.p_lam, *self.chi]

    def constraint_matrix(self) -> sp.Matrix:
        """``C = ({phi_a, phi_b})`` on ``M_2``; equals ``[[0, D], [-D, N]]``."""
        c = self.constraint_functions()
        return sp.Matrix(len(c), len(c), lambda a, b: self.on_M2(self.bracket(c[a], c[b])))

    def N(self) -> sp.Matrix:
        """``N_ij = {chi_i, chi_j}`` on ``M_2``."""
        m = len(self.lam)
        return self.constraint_matrix()[m:, m:]

    def dirac_bracket(self, f: Any, g: Any, at: dict[Any, Any] | None = None) -> sp.Expr:
        """Dirac bracket ``{f, g} - {f, phi_a} C^{ab} {phi_b, g}`` restricted to ``M_2``.

        Parameters
        ----------
        f, g : sympy.Expr
            Functions on ``T*P`` (any extensions; ``lambda``-dependent ones allowed).
        at : dict, optional
            A point ``{symbol: value}`` of ``(q, phat, params)``: every piece is evaluated
            there before ``C`` is inverted (exact and fast; the symbolic inverse of ``C`` can
            be large).

        Returns
        -------
        sympy.Expr
        """
        c = self.constraint_functions()

        sub = dict(zip(self.lam, self.lam_on_M2, strict=True))
        sub.update({s: 0 for s in self.p_lam})

        def ev(e: Any) -> sp.Expr:
            if at is None:
                return self.on_M2(e)
            return sp.sympify(e).subs(sub).subs(at)

        C = sp.Matrix(len(c), len(c), lambda a, b: ev(self.bracket(c[a], c[b])))
        fa = sp.Matrix([[ev(self.bracket(f, ph)) for ph in c]])
        bg = sp.Matrix([ev(self.bracket(ph, g)) for ph in c])
        out = ev(self.bracket(f, g)) - (fa * C.inv() * bg)[0, 0]
        return self._simp(out)

    def pi_tilde(self) -> list[sp.Expr]:
        """``p = pi~(q, phat) = phat - lambda^i(q, phat) W_i`` (lands in ``Mbar``)."""
        if self._pi_tilde is not None:
            return list(self._pi_tilde)
        n = len(self.q)
        self._pi_tilde = [
            self._simp(
                self.p_hat[A]
                - sum((self.lam_on_M2[i] * self.W[i, A] for i in range(len(self.lam))), 0)
            )
            for A in range(n)
        ]
        return list(self._pi_tilde)

    def _compose(self, f: Any, p_values: Sequence[Any]) -> sp.Expr:
        f = sp.sympify(f)
        return f.subs(dict(zip(self.p, p_values, strict=True)), simultaneous=True)

    def vakonomic_bracket(self, f: Any, g: Any) -> sp.Expr:
        """``{f, g}_vak = {f o pi~, g o pi~}_{M_2}`` for ``f, g`` functions of ``(q, p)``.

        Route: eliminate ``lambda`` (``F = f o pi~`` as a function of ``(q, phat)``), then the
        canonical bracket in the Darboux coordinates ``(q, phat)`` of ``omega_2``.

        Returns
        -------
        sympy.Expr
            A function of ``(q, phat)`` (i.e. on ``M_2``).
        """
        pt = self.pi_tilde()
        F, G = self._compose(f, pt), self._compose(g, pt)
        return self._simp(poisson_bracket(F, G, self.q, self.p_hat))

    def printed_bracket_18(self, f: Any, g: Any) -> sp.Expr:
        """Martínez et al. (2000), (18) read literally -- **wrong** (misprinted indices); for tests.

        ``d(f o pi~)/dq dg/dphat - ... + df/dlambda (D^-1 N D^-1) dg/dlambda`` with ``f o pi~``
        written ``f(q, phat - lambda W)`` and differentiated at fixed ``lambda``, then restricted
        to ``M_2``.
        """
        n, m = len(self.q), len(self.lam)
        pb = [self.p_hat[A] - sum((self.lam[i] * self.W[i, A] for i in range(m)), 0)
              for A in range(n)]  # fmt: skip
        F, G = self._compose(f, pb), self._compose(g, pb)
        first = poisson_bracket(F, G, self.q, self.p_hat)
        Dn = self.D
        mid = Dn.inv() * self.N() * Dn.inv()
        dF = sp.Matrix([[sp.diff(F, s) for s in self.lam]])
        dG = sp.Matrix([sp.diff(G, s) for s in self.lam])
        return self.on_M2(first + (dF * mid * dG)[0, 0])

    # -- Legendre map and the Hamiltonian of T*Q ----------------------------------------------
    def legendre_map(self, qdot: Sequence[Any], lam: Sequence[Any] | None = None) -> list[sp.Expr]:
        """``FL``: ``phat_A = g_AB qdot^B + lambda^i W_iA`` (and ``p_lambda = 0``), Section V.

        Parameters
        ----------
        qdot : list of sympy.Expr
            Velocities (``n`` entries).
        lam : list of sympy.Expr, optional
            Multipliers (default: the symbols :attr:`lam`).

        Returns
        -------
        list of sympy.Expr
            ``phat`` (``n`` entries); ``h1`` composed with it is the energy ``E_L``.
        """
        n, m = len(self.q), len(self.lam)
        lam = list(self.lam) if lam is None else [sp.sympify(x) for x in lam]
        qd = sp.Matrix([sp.sympify(x) for x in qdot])
        if qd.rows != n or len(lam) != m:
            raise ValueError(
                f"qdot must have n = {n} and lam m = {m} entries, got {qd.rows} and {len(lam)}"
            )
        out = self.metric * qd + self.W.T * sp.Matrix(lam)
        return [sp.expand(e) for e in out]

    def hamiltonian(self) -> sp.Expr:
        """``H(q, p) = 1/2 p^T g^-1 p + U`` on ``T*Q`` (``H o FL_L = E_L``); in :attr:`p`.

        ``{f, H}_vak`` (:meth:`vakonomic_bracket`) is the rate of ``f`` along the vakonomic
        motions, since ``H o pi~ = h_2`` (Martínez et al. 2000, Section VII).
        """
        pv = sp.Matrix(self.p)
        return (pv.T * self.metric.inv() * pv)[0, 0] / 2 + self.potential

    # -- vector field --------------------------------------------------------------------------
    def velocities(self) -> list[sp.Expr]:
        """``qdot = dh_2/dphat = g^{-1}(phat - W^T lambda)`` on ``M_2``."""
        return [self._simp(sp.diff(self.h2, s)) for s in self.p_hat]

    def hamiltonian_system(self, name: str = "vakonomic (q, phat)") -> Any:
        """``X_{h_2}`` on ``(M_2, omega_2)`` as a :class:`~nhfast.vectorfield.HamiltonianSystem`.

        Observables: ``energy`` (``h_2``), ``lambda_i`` (multipliers on ``M_2``) and
        ``constraint_i = W_i qdot`` (zero by construction: ``qdot`` lies in D on ``M_2``).
        """
        qd = self.velocities()
        obs: dict[str, sp.Expr] = {f"lambda_{i + 1}": e for i, e in enumerate(self.lam_on_M2)}
        for i in range(self.W.rows):
            obs[f"constraint_{i + 1}"] = sum(
                (self.W[i, A] * qd[A] for A in range(len(self.q))), sp.Integer(0)
            )
        for A, e in enumerate(qd):
            obs[f"qdot_{A + 1}"] = e
        return HamiltonianSystem(
            self.q, self.p_hat, self.h2, params=self.params, observables=obs, name=name
        )


def _light(expr: Any) -> sp.Expr:
    """Cheap normal form (rational functions of the symbols and of sin/cos as atoms)."""
    return sp.cancel(sp.sympify(expr))


def vakonomic_hamiltonian(
    system: Any, simplify: Simplifier = _light, max_steps: int | None = None
) -> VakonomicHamiltonian:
    """Run the constraint algorithm of Martínez et al. (2000) on the vakonomic problem.

    Parameters
    ----------
    system : NonholonomicSystem
        Natural Lagrangian and linear constraints (1-forms from
        :func:`nhfast.symbolic.vakonomic.equations.constraint_one_forms`).
    simplify : bool or callable
        Normal form used throughout (default: ``cancel``, cheap; ``True``: ``simplify``,
        slow with trigonometric coefficients).
    max_steps : int, optional
        Passed to :func:`dirac_bergmann`.

    Returns
    -------
    VakonomicHamiltonian
        With ``algorithm.stop_step == 2`` and multipliers determined under the paper's
        hypotheses.

    Raises
    ------
    ConstraintAlgorithmError
        If ``D = W g^{-1} W^T`` is singular at generic points (the paper needs it invertible),
        or the algorithm degenerates.
    """
    system = check_system(system)
    simp = simplifier(simplify)
    q = list(system.q)
    W = constraint_one_forms(system)
    m = W.rows
    g = system.metric
    taken = taken_names(system)
    p_hat = fresh_symbols([f"phat_{a}" for a in q], taken)
    lam = fresh_symbols([f"lambda_{i + 1}" for i in range(m)], taken)
    p_lam = fresh_symbols([f"p_lambda_{i + 1}" for i in range(m)], taken)
    p = fresh_symbols([f"p_{a}" for a in q], taken)
    ginv = g.inv().applyfunc(simp)
    D = (W * ginv * W.T).applyfunc(simp)
    declared = q + list(system.params)
    if generic_rank(D, declared) < m:
        raise ConstraintAlgorithmError(
            f"D = W g^-1 W^T (Martínez et al. 2000, (13)) is singular at generic points (rank "
            f"{generic_rank(D, declared)} < {m}): the constraints are dependent"
        )
    y = sp.Matrix(p_hat) - W.T * sp.Matrix(lam)
    h1 = simp((y.T * ginv * y)[0, 0] / 2 + system.potential)
    chi = [simp(-sp.diff(h1, s)) for s in lam]
    res = dirac_bergmann(
        h1,
        [*q, *lam],
        [*p_hat, *p_lam],
        primary=p_lam,
        params=system.params,
        solve_for=[*p_lam, *lam],
        max_steps=max_steps,
        simplify=simp,
    )
    lam_m2 = [
        simp(sp.trigsimp(e)) if e.has(sp.sin, sp.cos) else e for e in (res.solution[s] for s in lam)
    ]
    h2 = simp(h1.subs(dict(zip(lam, lam_m2, strict=True))))
    return VakonomicHamiltonian(
        q=q,
        p_hat=p_hat,
        lam=lam,
        p_lam=p_lam,
        p=p,
        params=list(system.params),
        W=W,
        metric=g,
        potential=system.potential,
        h1=h1,
        chi=chi,
        D=D,
        lam_on_M2=lam_m2,
        h2=h2,
        algorithm=res,
        integrable=is_integrable(system),
        simplify=simp,
    )


def vakonomic_hamiltonian_field(system: Any, name: str = "vakonomic (q, phat)") -> Any:
    """``X_{h_2}`` on ``(M_2, omega_2)`` with numerical linear solves instead of inverses.

    Uses the derived form (derived from (13)) ``h_2 = 1/2 phat^T X K^{-1} X^T phat + U`` with ``X``
    the frame of D and ``K = X^T g X``: with ``K v = X^T phat`` (Cholesky in the kernels),

    ``qdot = X v``,  ``dphat_A/dt = -(v^alpha (d X^B_alpha / d q^A) phat_B
    - 1/2 v^alpha v^beta d K_{alpha beta} / d q^A + d U / d q^A)``,

    and the multipliers from ``phat = g qdot + W^T lambda``: ``(W W^T) lambda = W (phat - g
    qdot)``.  No symbolic inverse is formed, so this scales to large systems; it equals
    :meth:`VakonomicHamiltonian.hamiltonian_system` (tested).

    Parameters
    ----------
    system : NonholonomicSystem
    name : str

    Returns
    -------
    nhfast.vectorfield.VectorField
        States ``(q, phat)`` (``split = n``), observables ``energy`` (``h_2``), ``lambda_i``,
        ``constraint_i`` (``W qdot``) and ``qdot_i``.
    """
    system = check_system(system)
    q = list(system.q)
    n, r = system.dim, system.rank
    X = system.frame
    g = system.metric
    W = constraint_one_forms(system)
    m = W.rows
    taken = taken_names(system)
    p_hat = fresh_symbols([f"phat_{a}" for a in q], taken)
    v = fresh_symbols([f"v_{i + 1}" for i in range(r)], taken)
    lam = fresh_symbols([f"lambda_{i + 1}" for i in range(m)], taken)
    K = X.T * g * X
    ph = sp.Matrix(p_hat)
    vv = sp.Matrix(v)
    qdot = X * vv
    dh = []
    for A in range(n):
        e = (vv.T * X.diff(q[A]).T * ph)[0, 0] - (vv.T * K.diff(q[A]) * vv)[0, 0] / 2
        dh.append(e + sp.diff(system.potential, q[A]))
    solves = [
        LinearSolve(unknowns=v, matrix=K, rhs=list(X.T * ph), spd=True),
        LinearSolve(unknowns=lam, matrix=W * W.T, rhs=list(W * (ph - g * qdot)), spd=True),
    ]
    obs: dict[str, sp.Expr] = {"energy": (ph.T * qdot)[0, 0] / 2 + system.potential}
    obs.update({f"lambda_{i + 1}": lam[i] for i in range(m)})
    wq = W * qdot
    obs.update({f"constraint_{i + 1}": wq[i] for i in range(m)})
    obs.update({f"qdot_{A + 1}": qdot[A] for A in range(n)})
    return VectorField(
        states=[*q, *p_hat],
        rhs=[*qdot, *(-e for e in dh)],
        params=list(system.params),
        observables=obs,
        split=n,
        name=name,
        solves=solves,
    )


@dataclass
class PresymplecticForm:
    """The Poincare-Cartan 2-form of ``calL = L + lambda^i W_iA qdot^A`` on ``TP``.

    Martínez et al. (2000), Section IV: ``omega_calL = dq^A ^ d(d calL / d qdot^A)`` (and
    ``d calL / d lambdadot = 0``), of rank ``2n``, with
    ``ker omega_calL = span{Z_i = d/dlambda^i - g^{BC} W_iC d/dqdot^B, d/dlambdadot^i}``.

    Attributes
    ----------
    coordinates : list of sympy.Symbol
        ``(q, lambda, qdot, lambdadot)`` of ``TP``.
    matrix : sympy.Matrix
        ``Omega[a, b] = omega(d/dz^a, d/dz^b)`` (antisymmetric); ``i_X omega = dE`` reads
        ``X^T Omega = grad E``.
    lagrangian : sympy.Expr
        ``calL``.
    energy : sympy.Expr
        ``E_calL = 1/2 qdot^T g qdot + U``.
    constraints : list of sympy.Expr
        ``Phi_i = W_iA qdot^A``.
    kernel : list of sympy.Matrix
        Column vectors ``Z_1..Z_m, d/dlambdadot^1..m`` (components in :attr:`coordinates`).
    """

    coordinates: list[Any]
    matrix: sp.Matrix
    lagrangian: sp.Expr
    energy: sp.Expr
    constraints: list[Any]
    kernel: list[Any]


def presymplectic_form(system: Any) -> PresymplecticForm:
    """``omega_calL``, ``E_calL`` and the kernel of the vakonomic extended Lagrangian.

    Parameters
    ----------
    system : NonholonomicSystem
        Natural Lagrangian, linear constraints (1-forms of :func:`constraint_one_forms`).

    Returns
    -------
    PresymplecticForm
        Symbols: velocities ``<q>_dot`` (as in :func:`vakonomic_equations`), multipliers
        ``lambda_i`` and ``lambda_i_dot``.
    """
    system = check_system(system)
    q = list(system.q)
    n = len(q)
    W = constraint_one_forms(system)
    m = W.rows
    g = system.metric
    qd = velocity_symbols(system)
    taken = taken_names(system) | {str(s) for s in qd}
    lam = fresh_symbols([f"lambda_{i + 1}" for i in range(m)], taken)
    lamd = fresh_symbols([f"lambda_{i + 1}_dot" for i in range(m)], taken)
    qv = sp.Matrix(qd)
    phi = [sp.expand(e) for e in W * qv]
    L = (
        (qv.T * g * qv)[0, 0] / 2
        - system.potential
        + sum((lam[i] * phi[i] for i in range(m)), sp.Integer(0))
    )
    coords = [*q, *lam, *qd, *lamd]
    N = len(coords)
    omega = sp.zeros(N, N)
    for A in range(n):
        pA = sp.diff(L, qd[A])
        for b, z in enumerate(coords):
            d = sp.diff(pA, z)
            if d != 0:
                omega[A, b] += d
                omega[b, A] -= d
    energy = (qv.T * g * qv)[0, 0] / 2 + system.potential
    gW = g.inv() * W.T  # column i: g^{BC} W_iC
    kernel = []
    for i in range(m):
        Z = sp.zeros(N, 1)
        Z[n + i] = 1
        for B in range(n):
            Z[n + m + B] = -gW[B, i]
        kernel.append(Z)
    for i in range(m):
        Z = sp.zeros(N, 1)
        Z[2 * n + m + i] = 1
        kernel.append(Z)
    return PresymplecticForm(
        coordinates=coords,
        matrix=omega.applyfunc(sp.expand),
        lagrangian=L,
        energy=energy,
        constraints=phi,
        kernel=kernel,
    )


@dataclass
class SODEMultiplierRates:
    """The second-order (SODE) vakonomic field on ``S = {lambdadot = B}``.

    Martínez et al. (2000), Section VI.

    Attributes
    ----------
    equations : EquationsOfMotion
        :func:`vakonomic_equations` (symbolic): states ``(q, qdot, lambda)``, rates
        ``(qdot, C, B)`` ((15), (14)).
    lambda_dot : list of sympy.Symbol
        ``lambdadot^i`` (free coordinates of ``TP``).
    B, C : list of sympy.Expr
        ``lambda``-rates (14) and accelerations (15) on ``P_2``.
    D : list of sympy.Expr
        ``Gamma(B^i) = qdot^A dB^i/dq^A + lambdadot^j dB^i/dlambda^j + C^A dB^i/dqdot^A``,
        with ``lambdadot`` free (the form of Martínez et al. (2000), Example VIII.6).
    D_on_S : list of sympy.Expr
        ``D`` on ``S`` (``lambdadot = B``): the ``d/dlambdadot`` components of the SODE field
        ``Gamma~`` (Example VII.4).
    """

    equations: Any
    lambda_dot: list[Any]
    B: list[Any]
    C: list[Any]
    D: list[Any]
    D_on_S: list[Any]


def sode_multiplier_rates(system: Any, simplify: Simplifier = _light) -> SODEMultiplierRates:
    """``D^i = Gamma(B^i)``: the multiplier accelerations of the SODE vakonomic field.

    Parameters
    ----------
    system : NonholonomicSystem
    simplify : bool or callable
        Normal form for ``B``, ``C`` and ``D`` (default ``cancel``).

    Returns
    -------
    SODEMultiplierRates
    """
    system = check_system(system)
    eq = vakonomic_equations(system, solve="symbolic", simplify=simplify)
    n = system.dim
    m = len(eq.states) - 2 * n
    q, qd, lam = eq.states[:n], eq.states[n : 2 * n], eq.states[2 * n :]
    C, B = list(eq.rhs[n : 2 * n]), list(eq.rhs[2 * n :])
    taken = taken_names(system) | {str(s) for s in eq.states}
    lamd = fresh_symbols([f"lambda_{i + 1}_dot" for i in range(m)], taken)
    simp = simplifier(simplify)

    def gamma(f: sp.Expr) -> sp.Expr:
        out = sum((qd[A] * sp.diff(f, q[A]) for A in range(n)), sp.Integer(0))
        out += sum((lamd[j] * sp.diff(f, lam[j]) for j in range(m)), sp.Integer(0))
        out += sum((C[A] * sp.diff(f, qd[A]) for A in range(n)), sp.Integer(0))
        return out

    D = [simp(gamma(b)) for b in B]
    on_S = dict(zip(lamd, B, strict=True))
    return SODEMultiplierRates(
        equations=eq,
        lambda_dot=lamd,
        B=B,
        C=C,
        D=D,
        D_on_S=[simp(d.subs(on_S)) for d in D],
    )
