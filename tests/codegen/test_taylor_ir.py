"""The typed Taylor IR (``nhfast.codegen.taylor.tape``) and its passes: a tape's size is the
sum of its lines' (counted by hand here), product groups respect the write barrier, and
values of the current order only exclude states and operands of convolutions."""

from __future__ import annotations

import math

import sympy as sp

from nhfast.codegen import KernelSet
from nhfast.codegen.taylor import TaylorSize, generate_taylor, taylor_stats, taylor_tape
from nhfast.codegen.taylor.passes import GROUP_PRODUCTS, current_only, fused
from nhfast.codegen.taylor.tape import Tape, Val, call

x, y, px, py, t = sp.symbols("x y p_x p_y t", real=True)
a = sp.symbols("a", positive=True)


def _ks(states, rhs, params=(), time=None) -> KernelSet:
    return KernelSet(list(states), list(params), time, {"rhs": list(rhs)})


def test_size_of_henon_heiles_by_hand():
    """x y, x^2, y^2: three convolutions; lin2, lin3 and four integrations: six others."""
    code = _ks([x, y, px, py], [px, py, -x - 2 * x * y, -y - x**2 + y**2])
    tape, _ = taylor_tape(code)
    assert [op.op for op in tape.ops].count("nht_integ") == 4
    assert sorted(op.op for op in tape.ops if op.conv) == ["nht_mul", "nht_sqr", "nht_sqr"]
    assert taylor_stats(code) == TaylorSize(3, 6)
    assert generate_taylor(code).size == TaylorSize(3, 6)


def test_size_of_other_operations_by_hand():
    # a cube (square and product in one line: 2), a quotient (1); x / a: a constant operand
    # (nht_cmul, 1), exp (its line counted as other operations: 1), sums and integrations
    code = _ks([x, y], [x**3 + x / y, x / a + sp.exp(y)], params=[a])
    tape, _ = taylor_tape(code)
    ops = [op.op for op in tape.ops]
    assert "nht_cube" in ops and "nht_div" in ops and "nht_cmul" in ops
    assert taylor_stats(code) == TaylorSize(2 + 1, 1 + 1 + 1 + 1 + 2)
    # the time and linear solves have no known size
    assert not taylor_stats(_ks([x], [x * t], time=t)).known
    assert math.isinf(taylor_stats(_ks([x], [x * t], time=t)).lin)


def _product(tape: Tape, u: Val, v: Val) -> Val:
    out = tape.new_var(True)
    tape.products[len(tape.ops)] = (out, u, v)
    tape.ops.append(
        call(
            "nht_mul",
            tape.n,
            f"NHT(nht_mul)(k, {tape.n}, ",
            out.strided(),
            ", ",
            u.arg(True),
            ", ",
            v.arg(True),
            ");",
            output=out.name,
        )  # fmt: skip
    )
    return out


def test_fused_groups_respect_the_write_barrier():
    tape = Tape(4)
    u, v, w, s = (tape.new_var(True) for _ in range(4))
    p1 = _product(tape, u, v)  # line 0
    tape.ops.append(  # line 1 writes w
        call(
            "nht_scale",
            4,
            "NHT(nht_scale)(k, 4, ",
            w.strided(),
            ", 2.0, ",
            s.arg(True),
            ");",
            output=w.name,
        )  # fmt: skip
    )
    _product(tape, u, w)  # line 2: shares u, but w is written after line 0: a new group
    _product(tape, v, u)  # line 3: shares u and v, nothing between writes them: joins line 0
    _product(tape, p1, u)  # line 4: p1 is written by line 0's group: joins line 2's
    lines = fused(tape)
    assert [ln.op for ln in lines] == ["nht_prods", "nht_scale", "nht_prods"]
    assert lines[0].render().startswith("NHT(nht_prods)(k, 4, 2, ")

    def outs(*members: int) -> set[str]:
        return {tape.products[m][0].name for m in members}

    assert outs(0, 3) <= set(lines[0].names) and not outs(2, 4) & set(lines[0].names)
    assert outs(2, 4) <= set(lines[2].names)
    # no group beyond GROUP_PRODUCTS products
    tape = Tape(4)
    u, v = tape.new_var(True), tape.new_var(True)
    for _ in range(GROUP_PRODUCTS + 1):
        _product(tape, u, v)
    lines = fused(tape)
    assert [ln.op for ln in lines] == ["nht_prods", "nht_mul"]
    assert lines[0].render().startswith(f"NHT(nht_prods)(k, 4, {GROUP_PRODUCTS}, ")


def test_current_only_keeps_states_and_operands_of_convolutions():
    code = _ks([x, y], [x * y + y, x + 2 * y])
    tape, states = taylor_tape(code)
    single = current_only(tape, states)
    assert not single & {v.name for v, _ in states}
    for op in tape.ops:
        if op.conv:  # operands read at every order
            assert not single & set(op.names[1:])
