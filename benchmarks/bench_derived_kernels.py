"""Derived kernels against hand-derived ones, per step (issue 30).

What a user constructs, ``nhfast.systems.veselova(n, form="structured", inertia=inertia)``
(the rigid-body engine's derivation, ``"engine"``), against the hand-derived programs of
``tests/references/veselova_hand.py`` (``"hand-derived"``: the inertia ``A Om A`` in the
form of García-Naranjo & Marrero 2020, the physical inertia ``J Om + Om J`` by the
Woodbury solve of the hand-written C anchor), both through nhfast's generators, for
n = 4, 8, 16, 32, 64 and N = 1000 trajectories (:func:`anchors.problem.initial_states`,
moments ``1 + i/n``), one thread, measured interleaved in one process (the least of
:data:`ROUNDS` rounds):

* ``taylor``: seconds per trajectory-step of ``nh.integrate(method="taylor")`` at the order of
  tol 1e-12, the same fixed order for both;
* ``dop853``: seconds per trajectory-step at rtol = atol = 1e-10;
* ``rhs``, ``divergence``, ``jvp``: nanoseconds per lane of one kernel call (the right-hand
  side, the divergence, the right-hand side of the tangent program), called in a C loop on
  the N lanes (the harness of ``anchors/hand_c``); the hand-derived ``A Om A`` divergence is the
  hand-written formula, the physical one is generated from the hand program.

Sizes, beside the times: the Taylor kernel's convolutions and other operations per order
(per lane, :func:`nhfast.codegen.taylor.taylor_size`), the right-hand side's operations per
call (SymPy's ``count_ops`` of the statements it needs, element-wise ones times ``n``), and
heyoka's decomposition of the same equations (elementary operations per order).

* ``pytest benchmarks/bench_derived_kernels.py`` (CI, ``--benchmark-disable``): a smoke run
  at n = 4 checking that the engine and hand-derived kernels agree.
* ``python benchmarks/bench_derived_kernels.py [--out FILE]`` writes
  ``benchmarks/results/derived_kernels.json`` and prints the table (a few minutes).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import sympy as sp

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))  # the hand-derived references

from anchors.machine import cpu_name  # noqa: E402
from anchors.problem import inertia as moments  # noqa: E402
from anchors.problem import initial_states  # noqa: E402

import nhfast as nh  # noqa: E402
from nhfast._abi import SYMBOL  # noqa: E402
from nhfast._core import taylor_order  # noqa: E402
from nhfast.codegen.differentiate import jvp_program, with_divergence  # noqa: E402
from nhfast.codegen.taylor import taylor_size  # noqa: E402
from nhfast.structured_field import StructuredVectorField  # noqa: E402
from nhfast.systems.rigid_bodies import rigid_body  # noqa: E402

RESULT = HERE / "results" / "derived_kernels.json"
NS = [4, 8, 16, 32, 64]
INERTIAS = ["a-omega-a", "physical"]
LANES = 1000
ROUNDS = 5
T_END = 5.0
TAYLOR_TOL = 1e-12
DOP853_TOL = 1e-10
GOAL = 1.15


def programs(n: int, inertia: str):
    """``{"engine": (program, tangent program), "hand-derived": (...)}``."""
    from references.veselova_hand import physical_program, veselova_program

    body = rigid_body(n, inertia)
    hand = veselova_program(n) if inertia == "a-omega-a" else with_divergence(physical_program(n))
    return {
        "engine": (body.program(), body.tangent_program()),
        "hand-derived": (hand, jvp_program(hand)),
    }


def rhs_operations(prog) -> int:
    """Operations of one right-hand side call: ``count_ops`` of the statements it needs
    (element-wise ones and vector outputs times ``n``)."""
    blocks = prog.outputs["rhs"]
    need = prog.needed(blocks)
    total = 0
    for st in prog.statements:
        if need & set(st.targets):
            w = prog.n if st.kind in ("reduce", "vector") else 1
            total += w * sum(sp.count_ops(e) for e in st.exprs)
    for b in blocks:
        total += (prog.n if prog.is_indexed(b) else 1) * sp.count_ops(b)
    return int(total)


def heyoka_size(n: int, inertia: str) -> int | None:
    """Elementary operations of heyoka's decomposition of the same equations (numeric moments
    folded), or None without heyoka."""
    try:
        import heyoka as hy
    except ImportError:
        return None
    from anchors import heyoka_veselova as hv

    eqs = hv.equations(n, inertia, moments(n))
    ta = hy.taylor_adaptive(eqs, np.zeros(2 * n), compact_mode=True, tol=1e-12)
    return len(ta.decomposition) - 4 * n  # less the variables and the outputs


class Harness:
    """Calls a kernel of nhfast's ABI in a C loop (the hand-written anchors' harness)."""

    def __init__(self) -> None:
        from anchors.hand_c.physical import HandPhysical

        self._c = HandPhysical()

    def ns_per_lane(self, address: int, xs: np.ndarray, par: np.ndarray) -> float:
        lanes = xs.shape[1]
        t0 = time.perf_counter()
        self._c.repeat_kernel(address, None, xs, par, 3)
        reps = max(3, round(0.1 * 3 / max(time.perf_counter() - t0, 1e-9)))
        t0 = time.perf_counter()
        self._c.repeat_kernel(address, None, xs, par, reps)
        return (time.perf_counter() - t0) / (reps * lanes) * 1e9

    def outputs(self, address: int, xs: np.ndarray, par: np.ndarray) -> np.ndarray:
        return self._c.repeat_kernel(address, None, xs, par, 1)


def _soa(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x.T)


def _per_step(vf, x0, par, method: str, **kw) -> float:
    t0 = time.perf_counter()
    r = nh.integrate(vf, x0, [0.0, T_END], method=method, params=par, threads=1,
                     observables=False, **kw)  # fmt: skip
    sec = time.perf_counter() - t0
    return sec / float(np.sum(r.stats["steps"]))


def measure(n: int, inertia: str, harness: Harness, rounds: int = ROUNDS,
            lanes: int = LANES) -> list[dict]:  # fmt: skip
    """Rows ``{n, inertia, kernel, engine, hand, ratio, ...}`` for one body."""
    progs = programs(n, inertia)
    fields = {k: StructuredVectorField(p, name=f"{k}_{inertia}_{n}") for k, (p, _) in progs.items()}
    tangents = {
        k: StructuredVectorField(t, name=f"{k}_{inertia}_{n}_tangent")
        for k, (_, t) in progs.items()
    }
    a = moments(n)
    x0 = initial_states(n, lanes, seed=n)
    rng = np.random.default_rng(n)
    xs = _soa(x0)
    # tangents to the constraint manifold, where the two fields (equal on it) have the same
    # derivative: d gamma . gamma = 0, d m . gamma + m . d gamma = 0
    g, m = x0[:, :n], x0[:, n:]
    dg, dm = rng.normal(size=g.shape), rng.normal(size=m.shape)
    dg -= np.sum(dg * g, axis=1, keepdims=True) * g
    dm -= np.sum(dm * g + m * dg, axis=1, keepdims=True) * g
    dxs = _soa(np.hstack([x0, dg, dm]))
    par = np.ascontiguousarray(np.repeat(a[:, None], lanes, axis=1))
    comp = {k: f.compile(("divergence",)) for k, f in fields.items()}
    tcomp = {k: f.compile(()) for k, f in tangents.items()}
    addresses = {
        "rhs": {k: c._keepalive.address(SYMBOL["rhs"]) for k, c in comp.items()},
        "divergence": {k: c._keepalive.address(SYMBOL["divergence"]) for k, c in comp.items()},
        "jvp": {k: c._keepalive.address(SYMBOL["rhs"]) for k, c in tcomp.items()},
    }
    inputs = {"rhs": xs, "divergence": xs, "jvp": dxs}
    # the two agree before they are timed (on the constraint manifold)
    agreement = {}
    for kernel, adr in addresses.items():
        rows = 1 if kernel == "divergence" else None  # the kernel writes its rows only
        outs = {k: harness.outputs(v, inputs[kernel], par)[:rows] for k, v in adr.items()}
        ref = outs["hand-derived"]
        agreement[kernel] = float(np.max(np.abs(outs["engine"] - ref)) / np.max(np.abs(ref)))
    p = taylor_order(0, TAYLOR_TOL, TAYLOR_TOL)
    runs = {
        "taylor": lambda vf: _per_step(
            vf, x0, a, "taylor", order=p, rtol=TAYLOR_TOL, atol=TAYLOR_TOL
        ),  # fmt: skip
        "dop853": lambda vf: _per_step(vf, x0, a, "dop853", rtol=DOP853_TOL, atol=DOP853_TOL),
    }
    for run in runs.values():  # compile and warm
        for vf in fields.values():
            run(vf)
    best: dict[tuple[str, str], float] = {}
    for _ in range(rounds):
        for kernel, run in runs.items():
            for k, vf in fields.items():
                v = run(vf) * 1e9
                best[kernel, k] = min(best.get((kernel, k), np.inf), v)
        for kernel, adr in addresses.items():
            for k, address in adr.items():
                v = harness.ns_per_lane(address, inputs[kernel], par)
                best[kernel, k] = min(best.get((kernel, k), np.inf), v)
    sizes = {
        k: dict(
            taylor_conv=taylor_size(f.compile_taylor().taylor_size)[0],
            taylor_other=taylor_size(f.compile_taylor().taylor_size)[1],
            rhs_operations=rhs_operations(progs[k][0]),
        )
        for k, f in fields.items()
    }
    hy_size = heyoka_size(n, inertia)
    rows = []
    for kernel in [*runs, *addresses]:
        e, h = best[kernel, "engine"], best[kernel, "hand-derived"]
        rows.append(
            dict(n=n, inertia=inertia, kernel=kernel, lanes=lanes, engine_ns=e,
                 hand_ns=h, ratio=e / h, met=e / h <= GOAL,
                 unit="ns per trajectory-step" if kernel in runs else "ns per lane-call",
                 order=p if kernel == "taylor" else None,
                 relative_difference=agreement.get(kernel),
                 engine_size=sizes["engine"], hand_size=sizes["hand-derived"],
                 heyoka_decomposition=hy_size)
        )  # fmt: skip
    return rows


def table(rows: list[dict]) -> str:
    out = ["inertia   n  kernel      engine       hand   ratio  conv/order (engine, hand, heyoka)"]
    for r in rows:
        es, hs = r["engine_size"], r["hand_size"]
        out.append(
            f"{r['inertia']:8s} {r['n']:3d}  {r['kernel']:10s} {r['engine_ns']:9.1f} "
            f"{r['hand_ns']:9.1f}  {r['ratio']:5.2f}{'' if r['met'] else ' !'}  "
            f"{es['taylor_conv']}, {hs['taylor_conv']}, {r['heyoka_decomposition']}"
        )
    return "\n".join(out)


def machine_info() -> dict:
    return dict(cpu=cpu_name(), cores=os.cpu_count(), platform=platform.platform(),
                python=sys.version.split()[0], nhfast=nh.__version__,
                loadavg_start=os.getloadavg()[0])  # fmt: skip


# -------------------------------------------------------------------------- tests ----


@pytest.mark.parametrize("inertia", INERTIAS)
def test_smoke_engine_and_hand_agree(inertia: str) -> None:
    rows = measure(4, inertia, Harness(), rounds=1, lanes=16)
    assert {r["kernel"] for r in rows} == {"taylor", "dop853", "rhs", "divergence", "jvp"}
    for r in rows:
        assert r["engine_ns"] > 0 and r["hand_ns"] > 0 and np.isfinite(r["ratio"])
        if r["relative_difference"] is not None:
            assert r["relative_difference"] < 1e-11, r


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="derived against hand-derived kernels, per step")
    ap.add_argument("--out", type=Path, default=RESULT)
    ap.add_argument("--ns", default=",".join(map(str, NS)))
    ap.add_argument("--rounds", type=int, default=ROUNDS)
    args = ap.parse_args(argv)
    harness = Harness()
    rows: list[dict] = []
    t0 = time.perf_counter()
    for n in [int(k) for k in args.ns.split(",")]:
        for inertia in INERTIAS:
            rows += measure(n, inertia, harness, rounds=args.rounds)
            print(table(rows[-5:]).split("\n", 1)[1], flush=True)
    doc = dict(kind="nhfast-derived-kernels", version=1,
               datetime=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
               machine_info=machine_info(), goal=GOAL, taylor_tol=TAYLOR_TOL,
               dop853_tol=DOP853_TOL, t_end=T_END, rows=rows,
               seconds=time.perf_counter() - t0)  # fmt: skip
    doc["machine_info"]["loadavg_end"] = os.getloadavg()[0]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=1), encoding="utf-8")
    print(table(rows))
    print(f"wrote {args.out} ({doc['seconds']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
