"""The cost model of a Taylor kernel: its size per order (:class:`TaylorSize`, statistics of
the tape), the terms of a pass unrolled for one order, and the order of least work."""

from __future__ import annotations

import math
from dataclasses import dataclass

from nhfast._abi import TAYLOR_MAX_ORDER
from nhfast.codegen.taylor.tape import Tape

#: The source comment that shows a reader the kernel's size (see :meth:`TaylorSize.record`).
COST_TAG = "nht-cost:"

#: A pass for one fixed order is generated when its unrolled convolutions have at most this
#: many terms per lane; the one-lane pass only up to :data:`UNROLL_TERMS_ONE_LANE`. Larger
#: unrolled code runs out of the instruction cache, and compiles in seconds. Both bounds were
#: measured against the loops on Henon-Heiles and Veselova n = 4, 8 (one lane: a faster
#: kernel call did not make a faster integration); see benchmarks/NOTES.md.
UNROLL_TERMS = 2000
UNROLL_TERMS_ONE_LANE = 1000

#: The cost model of :func:`cost_order`, in kernel terms per lane and step: the step's own
#: work (norms, step size, bookkeeping) STEP_TERMS + STEP_TERMS_PER_STATE n, and
#: HORNER_WEIGHT per term of the series' sum (n p). The weights were measured on Henon-Heiles
#: (a batch and one trajectory alike); see benchmarks/NOTES.md.
STEP_TERMS = 256
STEP_TERMS_PER_STATE = 16
HORNER_WEIGHT = 2


@dataclass(frozen=True)
class TaylorSize:
    """The size of a Taylor kernel per order and lane, counted per component.

    Attributes
    ----------
    conv : int
        Components of convolutions (their k-th coefficient a sum over the orders).
    lin : float
        Components of other operations; ``inf`` when the tape has lines the model cannot
        count (linear solves, the time): such a kernel has no known size.
    """

    conv: int
    lin: float

    @property
    def known(self) -> bool:
        """Whether the model can count the kernel (``lin`` finite)."""
        return not math.isinf(self.lin)

    def terms(self, order: int) -> float:
        """Terms per lane of ``order`` orders: a convolution at order k has about k + 1."""
        return self.conv * order * (order + 1) / 2 + self.lin * order

    def record(self) -> str:
        """The comment text that records the size in a generated source."""
        return f"{COST_TAG} conv={self.conv} lin={'inf' if math.isinf(self.lin) else int(self.lin)}"

    def as_meta(self) -> list:
        """The size as JSON (stored with a cached source): ``[conv, lin]``, ``lin`` None for
        ``inf``."""
        return [self.conv, None if math.isinf(self.lin) else self.lin]

    @classmethod
    def from_meta(cls, value: object) -> TaylorSize | None:
        """The size :meth:`as_meta` stored, or None when ``value`` is not one."""
        if not isinstance(value, list) or len(value) != 2 or not isinstance(value[0], int):
            return None
        lin = value[1]
        return cls(value[0], math.inf if lin is None else float(lin))


def tape_size(tape: Tape) -> TaylorSize:
    """The size of ``tape``: the sum of its lines' sizes (``inf`` other operations for a tape
    with linear solves)."""
    if tape.solve_ws:
        return TaylorSize(0, math.inf)
    conv, lin = 0, 0.0
    for op in tape.ops:
        if math.isinf(op.lin):
            return TaylorSize(conv, math.inf)
        conv += op.conv
        lin += op.lin
    return TaylorSize(conv, lin)


def taylor_size(size: TaylorSize | None) -> tuple[int, float]:
    """``(convolutions, other operations)`` per order and lane of a Taylor kernel.

    Parameters
    ----------
    size : TaylorSize or None
        The kernel's size; None: not known.

    Returns
    -------
    tuple
        ``(conv, lin)``, each counted per component (``inf`` operations for a kernel with
        linear solves; ``(0, inf)`` if the size is not known).
    """
    s = size
    return (0, math.inf) if s is None else (s.conv, s.lin)


def unrolled_terms(size: TaylorSize | None, order: int) -> float:
    """Terms per lane of a Taylor kernel of ``size`` with its loops over the
    orders unrolled at ``order`` (a convolution at order k has about k + 1; inf if the size
    is not known)."""
    s = size
    return math.inf if s is None else s.terms(order)


def cost_order(size: TaylorSize | None, n_state: int, p0: int) -> int:
    """The order of least work per unit time for a Taylor kernel of ``size``, with the
    accuracy of the tolerance's order ``p0``.

    Jorba & Zou (2005) take p0 = ceil(1 - ln(eps) / 2) and steps of ``exp(-2)`` times the
    radius of convergence: the best order when a step costs about ``p^2`` convolution terms.
    Where the convolutions are few (a small right-hand side) the step's other work counts,
    and a higher order with longer steps does less. At an order ``p > p0`` the core shrinks
    the radius by ``exp(-2 (p0 + 1) / p)`` (the truncation error of the rule at ``p0 + 1``;
    see ``_core.integrate_batch``'s ``order_auto``), so a unit of time takes about
    ``exp(2 (p0 + 1) / p + 0.7 / (p - 1))`` steps of ``W(p) = A + (lin + HORNER_WEIGHT n) p +
    conv p (p + 1) / 2`` terms (``A``: the step's own work, :data:`STEP_TERMS`), and the run
    ends with the error of the rule at ``p0 + 1``: of a tolerance ``e^2`` tighter.

    Returns the order above ``p0``, up to ``min(2 p0, TAYLOR_MAX_ORDER)``, that minimises
    their product: ``p0 + 1`` is among them, the rule of Jorba & Zou at that tighter
    tolerance, so the one chosen reaches that accuracy in at most the rule's time (the bound
    ``2 p0`` keeps steps short enough that the series' terms do not grow far beyond the
    state: a harmonic oscillator at 3 p0 lost digits to round-off). Where the rule at ``p0 +
    1`` would ask for less than double round-off (``exp(-2 (p0 + 1)) < 2^-52``) the extra
    accuracy is out of reach, and ``p0`` competes with the orders above it on time alone.
    ``p0`` when the size is not known (kernels with linear solves).

    On the Veselova bodies, comparing ``p0`` with the orders above it on time alone kept
    ``p0`` for every one; the orders above it cut the final errors several-fold for little
    more time (see benchmarks/NOTES.md).

    Parameters
    ----------
    size : TaylorSize or None
        The size of a Taylor kernel (:func:`nhfast.codegen.taylor.generate_taylor`); None: not
        known.
    n_state : int
        Its number of states.
    p0 : int
        The order of the tolerance (``_core.taylor_order``), at least 2.

    Returns
    -------
    int
    """
    s = size
    if s is None or not s.known or p0 < 2:
        return p0
    a = STEP_TERMS + STEP_TERMS_PER_STATE * n_state
    b = s.lin + HORNER_WEIGHT * n_state

    def work(p: int) -> float:
        pe = p0 + 1 if p > p0 else p0
        return (a + b * p + s.conv * p * (p + 1) / 2) * math.exp(2 * pe / p + 0.7 / (p - 1))

    top = min(2 * p0, TAYLOR_MAX_ORDER)
    if top == p0:
        return p0
    reachable = math.exp(-2 * (p0 + 1)) >= 2.0**-52
    return min(range(p0 + 1 if reachable else p0, top + 1), key=work)


def unroll_pays(size: TaylorSize | None, order: int) -> bool:
    """Whether a Taylor kernel for the fixed ``order`` is worth generating beside the general
    kernel of the same system, of ``size``: at most :data:`UNROLL_TERMS`
    terms.

    Parameters
    ----------
    size : TaylorSize or None
        The general kernel's size; None: not known (never pays).
    order : int
        The order.

    Returns
    -------
    bool
    """
    return unrolled_terms(size, order) <= UNROLL_TERMS


def one_lane_unroll_pays(size: TaylorSize, order: int) -> bool:
    """Whether the one-lane pass of a kernel unrolled for ``order`` is worth generating too:
    at most :data:`UNROLL_TERMS_ONE_LANE` terms."""
    return size.terms(order) <= UNROLL_TERMS_ONE_LANE
