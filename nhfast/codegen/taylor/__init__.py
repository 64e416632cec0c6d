"""Generate the Taylor-coefficient kernel ``nh_taylor`` of a system from its SymPy expressions.

The right-hand side is decomposed into a *tape* of elementary operations (automatic
differentiation of Taylor series: Moore 1966; Jorba & Zou 2005, Exp. Math. 14): sums,
products, quotients, integer and real powers, ``sqrt``, ``exp``, ``log``, ``sin``/``cos``
(``tan``, hyperbolic and inverse functions through them), reductions over an index, products
with parameter matrices and linear solves. Every operation gets the standard recurrence for
its ``k``-th normalised coefficient (``nhfast/codegen/include/taylor.h``); the kernel runs the
tape order by order, ``x^[k+1] = f^[k] / (k + 1)``, lanes innermost.

Sub-expressions of the parameters alone (``1/a_i``, a mass matrix's entries, ...) are
*constants*: they are computed once per kernel call, and an operation with a constant operand
uses its value only (no convolution). A linear solve ``M u = b`` factorises ``M^[0]`` once per
call and gets every further coefficient from
``M^[0] u^[k] = b^[k] - sum_{j >= 1} M^[j] u^[k-j]`` with that factorisation.

The modules, by job: :mod:`.tape` (the typed IR: values and lines), :mod:`.build` (SymPy
expressions to lines), :mod:`.frontends` (a :class:`~nhfast.codegen.KernelSet` or an
:class:`~nhfast.codegen.IndexedProgram` to a tape), :mod:`.passes` (products fused, values of
the current order only, layout), :mod:`.render` (C text, the last step) and :mod:`.cost` (the
size of the tape and the order's cost model).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from nhfast._abi import TAYLOR_MAX_ORDER
from nhfast._keys import expression_digest
from nhfast.codegen._printer import banner
from nhfast.codegen.ckernels import KernelSet, kernel_set_digest
from nhfast.codegen.indexed import IndexedProgram
from nhfast.codegen.structured import program_digest
from nhfast.codegen.taylor.cost import HORNER_WEIGHT as HORNER_WEIGHT
from nhfast.codegen.taylor.cost import STEP_TERMS as STEP_TERMS
from nhfast.codegen.taylor.cost import STEP_TERMS_PER_STATE as STEP_TERMS_PER_STATE
from nhfast.codegen.taylor.cost import UNROLL_TERMS as UNROLL_TERMS
from nhfast.codegen.taylor.cost import UNROLL_TERMS_ONE_LANE as UNROLL_TERMS_ONE_LANE
from nhfast.codegen.taylor.cost import (
    TaylorSize,
    tape_size,
)
from nhfast.codegen.taylor.cost import cost_order as cost_order
from nhfast.codegen.taylor.cost import taylor_size as taylor_size
from nhfast.codegen.taylor.cost import unroll_pays as unroll_pays
from nhfast.codegen.taylor.cost import unrolled_terms as unrolled_terms
from nhfast.codegen.taylor.frontends import kernel_set_tape, program_tape
from nhfast.codegen.taylor.passes import GROUP_OPERANDS as GROUP_OPERANDS
from nhfast.codegen.taylor.passes import GROUP_PRODUCTS as GROUP_PRODUCTS
from nhfast.codegen.taylor.render import render
from nhfast.codegen.taylor.tape import Tape, Val

__all__ = [
    "generate_taylor_c",
]

#: Lanes per pass of a Taylor kernel (smaller remainders run in passes of 4, 2, 1 lanes).
TAYLOR_CHUNK = 8


class TaylorSource(NamedTuple):
    """A generated Taylor kernel: its C ``source`` and its ``size`` (:class:`TaylorSize`)."""

    source: str
    size: TaylorSize


def taylor_digest(code: KernelSet | IndexedProgram) -> str:
    """SHA-256 of what the Taylor kernel of ``code`` depends on (the ``rhs`` and its solves)."""
    if isinstance(code, IndexedProgram):
        return expression_digest(["taylor", "program", program_digest(code)])
    return expression_digest(["taylor", "kernel_set", kernel_set_digest(code)])


def taylor_tape(code: KernelSet | IndexedProgram) -> tuple[Tape, list[tuple[Val, int]]]:
    """The tape of the Taylor kernel of ``code`` and its states (work value, component)."""
    if isinstance(code, IndexedProgram):
        if "rhs" not in code.outputs:
            raise ValueError("the program has no 'rhs' output")
        return program_tape(code)
    if "rhs" not in code.kernels:
        raise ValueError("the kernel set has no 'rhs' family")
    return kernel_set_tape(code)


def generate_taylor(
    code: KernelSet | IndexedProgram,
    provenance: Mapping[str, object] | None = None,
    order: int | None = None,
) -> TaylorSource:
    """The Taylor kernel of ``code``, its source and its size (the statistics of its tape
    that :func:`cost_order` and :func:`unroll_pays` take); see :func:`generate_taylor_c`."""
    tape, states = taylor_tape(code)
    if isinstance(code, IndexedProgram):
        n_state, n_par = code.n_state, code.n_params
        linalg = any(st.kind == "solve" for st in code.statements)
    else:
        n_state, n_par = len(code.states), len(code.params)
        linalg = bool(code.solves)
    head = banner(
        generator="nhfast.codegen.generate_taylor_c",
        regenerate="nhfast.codegen.generate_taylor_c(code), e.g. through compile_taylor()",
        digest=taylor_digest(code),
        legend=[],
        provenance=provenance,
        details=f"Taylor kernel: {len(tape.work)} work variables, {len(tape.consts)} "
        f"constants, {len(tape.ops)} operations per order.",
    )
    if order is not None and not (
        isinstance(order, int) and not isinstance(order, bool) and 1 <= order <= TAYLOR_MAX_ORDER
    ):
        raise ValueError(f"order must be an int in [1, {TAYLOR_MAX_ORDER}] or None, got {order!r}")
    source = render(tape, states, n_state, n_par, head, linalg, order)
    return TaylorSource(source, tape_size(tape))


def generate_taylor_c(
    code: KernelSet | IndexedProgram,
    provenance: Mapping[str, object] | None = None,
    order: int | None = None,
) -> str:
    """Return the C99 source of the Taylor-coefficient kernel library of ``code``.

    Parameters
    ----------
    code : KernelSet or IndexedProgram
        The system: its ``rhs`` family (and the solves it uses) is expanded.
    provenance : mapping, optional
        Shown in the banner: ``"system"``, the system's name.
    order : int, optional
        Also a pass for this order alone, its loops over the orders unrolled (straight-line
        code with constant offsets; the same operations in the same order, so the same
        results). ``nh_taylor`` takes it when called with that order and the general pass
        otherwise. Worth it for small right-hand sides only (:func:`unroll_pays`).

    Returns
    -------
    str
        The source: a banner, ``nh_info`` (flags ``NH_HAS_TAYLOR``) and ``nh_taylor`` (see
        ``nh_abi.h``: ``coef[(k * n_state + i) * ld + l]`` is the ``k``-th normalised Taylor
        coefficient of component ``i`` of lane ``l``, ``k = 0..order``).

    Raises
    ------
    ValueError
        If the right-hand side uses a function the Taylor method cannot expand (the message
        names it and lists the supported ones), or derivatives of a solve's unknowns.
    """
    return generate_taylor(code, provenance, order).source


def taylor_stats(code: KernelSet | IndexedProgram) -> TaylorSize:
    """The size of the Taylor kernel of ``code`` from its tape (no C rendered)."""
    return tape_size(taylor_tape(code)[0])
