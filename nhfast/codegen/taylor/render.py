"""Rendering of the Taylor kernel to C: the passes over the lanes (general and for one fixed
order), their instances for vector and one-lane work, and ``nh_taylor`` around them."""

from __future__ import annotations

from nhfast.codegen._printer import preamble
from nhfast.codegen.taylor.cost import one_lane_unroll_pays, tape_size
from nhfast.codegen.taylor.passes import Layout, fused, layout
from nhfast.codegen.taylor.tape import Tape, Val

#: Work of a Taylor kernel call up to this many doubles lives on the stack (32 kB), beyond
#: it on the heap; pivots of its solves up to STACK_PIVOTS entries likewise.
STACK_DOUBLES = 4096
STACK_PIVOTS = 256


def pass_body(lay: Layout, tape: Tape, n_par: int, fixed: int | None = None) -> list[str]:
    """The body of one pass over ``nl`` lanes (a template: NHT_T, NHT(), NHT_LANES); with
    ``fixed``, the pass for that order only (a constant: its loops unroll completely)."""
    nconst = sum(c for _, c in tape.consts)
    order = "order" if fixed is None else "order_arg"
    lines = [
        "static NHT_NOINLINE int NHT(nht_pass)(const double *restrict t, const double *restrict x, "
        f"const double *restrict par, double *restrict coef, int64_t {order}, int64_t ld, "
        "int64_t l0, int64_t nl, NHT_T *restrict W, int64_t *restrict piv) {",
        "    (void)t; (void)par; (void)piv;",
        *([] if fixed is None else [f"    const int64_t order = {fixed}; (void)order_arg;"]),
        f"    enum {{ NHT_TOT = {max(lay.rows, 1)} }};",
        "    const size_t P1 = (size_t)(order + 1);",
        f"    NHT_T *restrict WT = W + (size_t){lay.rows} * P1;",
        f"    NHT_T *restrict PAR = WT + {lay.slots};",
        f"    NHT_T *restrict CST = PAR + {n_par};",
        "    (void)WT; (void)PAR; (void)CST;",
    ]
    off = n_par + nconst
    poff = 0
    for sname, nv, np_ in tape.solve_ws:
        lines.append(f"    NHT_T *restrict {sname}_A = PAR + {off};")
        lines.append(f"    NHT_T *restrict {sname}_b = {sname}_A + {nv - np_};")
        lines.append(f"    int64_t *restrict {sname}_p = piv + (size_t){poff} * NHT_LANES;")
        off += nv
        poff += np_
    lines += [f"    {s}" for s in lay.start]
    if fixed is not None:
        lines.append('    _Pragma("GCC unroll 64")')
    lines.append("    for (int64_t k = 0; k < order; ++k) {")
    lines += [f"        {s}" for s in lay.ops]
    lines.append("    }")
    lines.append("    for (int64_t k = 0; k <= order; ++k) {")
    lines += [f"        {s}" for s in lay.out]
    lines += ["    }", "    return NH_OK;", "}", ""]
    return lines


def instances(
    body: list[str],
    scalar: str,
    vector: str,
    one_lane: bool = True,
    body_one: list[str] | None = None,
) -> list[str]:
    """``body`` instantiated, with vector extensions, for NHT_VW lanes (``f##vector``) and for
    one lane (names ``f##scalar``, from ``body_one`` if given: the same operations with their
    work values placed otherwise, see :func:`~nhfast.codegen.taylor.passes.layout`; unless
    not ``one_lane``). The vector pass comes first: placed after the larger one-lane pass
    (register blocks), the FPU chain's vector pass, the same instructions, ran markedly
    slower (see benchmarks/NOTES.md)."""
    one = [
        "#define NHT_T double",
        f"#define NHT(f) f##{scalar}",
        "#define NHT_LANES 1",
        "#define NHT_ZERO 0.0",
        *(body if body_one is None else body_one),
        "#undef NHT_T",
        "#undef NHT",
        "#undef NHT_LANES",
        "#undef NHT_ZERO",
    ]
    return [
        "#if NHT_HAVE_VEC",
        "#define NHT_T nht_vw",
        f"#define NHT(f) f##{vector}",
        "#define NHT_LANES NHT_VW",
        "#define NHT_ZERO ((nht_vw){0.0})",
        *body,
        "#undef NHT_T",
        "#undef NHT",
        "#undef NHT_LANES",
        "#undef NHT_ZERO",
        "#endif",
        *(one if one_lane else []),
    ]


def render(tape: Tape, states: list[tuple[Val, int]], n_state: int, n_par: int,
            head: str, uses_linalg: bool, fixed: int | None) -> str:  # fmt: skip
    """The C source of the Taylor kernel library of ``tape`` (after its passes)."""
    nconst = sum(c for _, c in tape.consts)
    solve_v = sum(v for _, v, _ in tape.solve_ws)
    solve_p = sum(p for _, _, p in tape.solve_ws)
    size = tape_size(tape)
    ops = fused(tape)
    lay = layout(tape, states, ops, n_state, n_par)  # vector passes
    lay1 = layout(tape, states, ops, n_state, n_par, one_row=False)  # one lane
    body_one = pass_body(lay1, tape, n_par)
    passes = instances(pass_body(lay, tape, n_par), "_1", "_v", body_one=body_one)
    args_v = "t, x, par, coef, order, ld, l0, nl, (nht_vw *)W, piv"
    args_1 = "t, x, par, coef, order, ld, l0, 1, W, piv"
    pick_v = pick_1 = ""  # the unrolled passes at their order, if any
    if fixed is not None:
        one_lane = one_lane_unroll_pays(size, fixed)
        passes += instances(
            pass_body(lay, tape, n_par, fixed),
            "_1u",
            "_vu",
            one_lane,
            pass_body(lay1, tape, n_par, fixed),
        )
        pick_v = f"order == {fixed} ? nht_pass_vu({args_v}) : "
        if one_lane:
            pick_1 = f"order == {fixed} ? nht_pass_1u({args_1}) : "
    lines = [
        head,
        *([] if fixed is None else [f"#define NHT_FIXED_ORDER {fixed}"]),
        preamble(*(["linalg.h"] if uses_linalg else []), "taylor.h"),
        f"static const int64_t nh_info_data[NH_INFO_LEN] = "
        f"{{NH_ABI_VERSION, {n_state}, {n_par}, 0, NH_HAS_TAYLOR, 0}};",
        "NH_EXPORT const int64_t *nh_info(void) { return nh_info_data; }",
        "",
        f"/* {len(tape.work)} work variables ({lay.rows} values per order, {lay.slots} of the "
        f"current order only), {len(tape.consts)} constants ({nconst} values), "
        f"{len(tape.ops)} operations per order */",
        f"/* {size.record()} */",
        *passes,
        "",
        "NH_EXPORT int nh_taylor(void *ctx, const double *restrict t, const double *restrict x, "
        "const double *restrict par, double *restrict coef, int64_t order, int64_t nlanes, "
        "int64_t ld) {",
        "    (void)ctx;",
        "    if (nlanes < 0 || ld < nlanes) return NH_ERR_SIZE;",
        "    if (order < 1 || order > NH_TAYLOR_MAX_ORDER) return NH_ERR_ARG;",
        "    if (nlanes == 0) return NH_OK;",
        f"    const size_t rest_v = {lay.slots + n_par + nconst + solve_v};",
        f"    const size_t nv = (size_t){lay.rows} * (size_t)(order + 1) + rest_v;",
        f"    const size_t nv1 = (size_t){lay1.rows} * (size_t)(order + 1) + rest_v - {lay.slots};",
        "    /* the work of a small system on the stack (no allocation per step), else the heap:",
        "     * nv values of NHT_VW lanes for the vector pass, nv1 of one lane alone */",
        "    const size_t nvv = (size_t)NHT_VW * nv;",
        "    const size_t nw = nlanes >= 2 && nvv > nv1 ? nvv : nv1;",
        f"    double stack_w[{STACK_DOUBLES} + 8];",
        f"    const int on_stack = nw <= {STACK_DOUBLES};",
        "    void *mem = on_stack ? NULL : malloc(sizeof(double) * (nw + 8));",
        "    double *base = on_stack ? stack_w : (double *)mem;",
        "    double *W = base ? (double *)(((uintptr_t)base + 63) & ~(uintptr_t)63) : NULL;",
        *(
            [
                f"    int64_t piv[{solve_p} * 8 + 1];",
                "    if (!W) return NH_ERR_NOMEM;",
            ]
            if solve_p * 8 + 1 <= STACK_PIVOTS
            else [
                f"    int64_t *piv = (int64_t *)malloc(sizeof(int64_t) * ({solve_p} * 8 + 1));",
                "    if (!W || !piv) { free(mem); free(piv); return NH_ERR_NOMEM; }",
            ]
        ),
        "    int rc = NH_OK;",
        "    for (int64_t l0 = 0; l0 < nlanes && rc == NH_OK;) {",
        "        const int64_t rest = nlanes - l0;",
        "#if NHT_HAVE_VEC",
        "        if (rest >= 2) {",
        "            const int64_t nl = rest < NHT_VW ? rest : NHT_VW;",
        f"            rc = {pick_v}nht_pass_v({args_v});",
        "            l0 += nl;",
        "            continue;",
        "        }",
        "#endif",
        f"        rc = {pick_1}nht_pass_1({args_1});",
        "        l0 += 1;",
        "    }",
        "    free(mem);",
        *([] if solve_p * 8 + 1 <= STACK_PIVOTS else ["    free(piv);"]),
        "    return rc;",
        "}",
        "",
    ]
    return "\n".join(lines)
