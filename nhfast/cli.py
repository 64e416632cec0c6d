"""The ``nhfast`` command: a demonstration run and kernel-cache housekeeping."""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from collections.abc import Sequence

import numpy as np
import sympy as sp


def sleigh_system():
    """Chaplygin sleigh in body velocities: v along the blade, angular velocity omega.

    Contact point (x, y) at distance a behind the centre of mass along the blade, mass m,
    inertia J about the centre of mass. The knife edge forbids sideways slip; energy
    E = (m v^2 + (J + m a^2) omega^2)/2 is conserved and every motion tends to a straight
    line with omega -> 0 and v -> sqrt(2E/m) (Chaplygin 1911; Bloch, Nonholonomic Mechanics
    and Control, 1.7).
    """
    import nhfast as nh

    x, y, th, v, om = sp.symbols("x y theta v omega")
    a, m, J = sp.symbols("a m J", positive=True)
    rhs = [v * sp.cos(th), v * sp.sin(th), om, a * om**2, -m * a * v * om / (J + m * a**2)]
    energy = (m * v**2 + (J + m * a**2) * om**2) / 2
    return nh.VectorField(
        [x, y, th, v, om], rhs, params=[a, m, J], observables={"energy": energy}, name="sleigh"
    )


def _table(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    line = "  ".join("-" * w for w in widths)
    fmt = lambda r: "  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True))  # noqa: E731
    return "\n".join([fmt(header), line, *map(fmt, rows)])


def demo(lanes: int, t_end: float, threads: int, scipy_lanes: int) -> int:
    """Integrate a batch of Chaplygin sleighs with every method and print a table."""
    import nhfast as nh

    vf = sleigh_system()
    rng = np.random.default_rng(0)
    x0 = np.column_stack([np.zeros((lanes, 3)), rng.normal(size=(lanes, 2))])
    par = np.column_stack(
        [rng.uniform(0.2, 1.0, lanes), rng.uniform(0.5, 2.0, lanes), rng.uniform(0.5, 2.0, lanes)]
    )
    t = np.linspace(0.0, t_end, 101)
    t0 = time.perf_counter()
    cs = vf.compile(("observables",))
    print(
        f"nhfast {nh.__version__}: Chaplygin sleigh, {lanes} trajectories to t = {t_end:g}, "
        f"{threads} thread(s); kernels: {cs.backend} backend, "
        f"{'cache hit' if cs.cache_hit else 'compiled'} in {time.perf_counter() - t0:.2f} s"
    )
    ref = nh.integrate(
        vf, x0, t, method="dop853", params=par, rtol=1e-13, atol=1e-13, threads=threads
    )
    rows = []
    runs = [
        ("dop853", dict(rtol=1e-10, atol=1e-12)),
        ("dopri5", dict(rtol=1e-8, atol=1e-10)),
        ("rk4", dict(h=0.01)),
        ("gauss4", dict(h=0.05)),
        ("gauss6", dict(h=0.1)),
    ]
    for method, kw in runs:
        t0 = time.perf_counter()
        res = nh.integrate(vf, x0, t, method=method, params=par, threads=threads, **kw)
        wall = time.perf_counter() - t0
        e = res.observables["energy"]
        drift = np.max(np.abs(e - e[:, :1]) / e[:, :1])
        err = np.max(np.abs(res.y[:, -1] - ref.y[:, -1]))
        rows.append(
            [
                method,
                ", ".join(f"{k}={v:g}" for k, v in kw.items()),
                f"{wall * 1e3:.1f}",
                f"{np.mean(res.stats['steps']):.0f}",
                f"{np.mean(res.stats['rhs_evals']):.0f}",
                f"{drift:.1e}",
                f"{err:.1e}",
            ]
        )
    print()
    print(
        _table(
            rows,
            [
                "method",
                "settings",
                "time [ms]",
                "steps/traj",
                "f evals/traj",
                "max |dE/E|",
                "error",
            ],
        )
    )
    e0 = ref.observables["energy"][:, 0]
    vlim = ref.y[:, -1, 3] / np.sqrt(2 * e0 / par[:, 1])
    print(
        f"\nerror: max |x(T) - x_ref(T)| against dop853 at rtol 1e-13.\n"
        f"Chaplygin's asymptotics: v(T)/sqrt(2E/m) = {np.median(vlim):.6f} (median; -> 1), "
        f"|omega(T)| <= {np.max(np.abs(ref.y[:, -1, 4])):.1e}"
    )
    if scipy_lanes > 0:
        from scipy.integrate import solve_ivp

        f = sp.lambdify([vf.states, vf.params], vf.rhs)
        k = min(scipy_lanes, lanes)
        t0 = time.perf_counter()
        for i in range(k):
            solve_ivp(
                lambda _t, y, p=par[i]: f(y, p), (0, t_end), x0[i], method="DOP853",
                t_eval=t, rtol=1e-10, atol=1e-12,
            )  # fmt: skip
        per_scipy = (time.perf_counter() - t0) / k
        t0 = time.perf_counter()
        nh.integrate(vf, x0, t, method="dop853", params=par, threads=threads, observables=False)
        per_nh = (time.perf_counter() - t0) / lanes
        print(
            f"SciPy solve_ivp(DOP853) on {k} trajectories: {per_scipy * 1e3:.1f} ms each; "
            f"nhfast: {per_nh * 1e6:.1f} us each ({per_scipy / per_nh:.0f}x)"
        )
    return 0


def cache(action: str) -> int:
    from nhfast import _jit

    root = _jit.cache_dir()
    entries = sorted(root.glob("k*")) if root.exists() else []
    if action == "info":
        size = sum(f.stat().st_size for e in entries for f in e.iterdir() if f.is_file())
        print(f"cache: {root}\nentries: {len(entries)}\nsize: {size / 1e6:.2f} MB")
    else:
        for e in entries:
            shutil.rmtree(e, ignore_errors=True)
        print(f"removed {len(entries)} entries from {root}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="nhfast", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("demo", help="integrate a batch of Chaplygin sleighs and print a table")
    d.add_argument("--lanes", type=int, default=2000, help="number of trajectories")
    d.add_argument("--t", type=float, default=20.0, help="final time")
    d.add_argument("--threads", type=int, default=2)
    d.add_argument(
        "--scipy", type=int, default=20, help="trajectories timed through SciPy (0: skip)"
    )
    c = sub.add_parser("cache", help="kernel cache: where it is, how big, clear it")
    c.add_argument("action", choices=["info", "clear"])
    args = parser.parse_args(argv)
    if args.command == "demo":
        if args.lanes < 1 or args.t <= 0 or args.threads < 1:
            parser.error("--lanes and --threads must be >= 1 and --t > 0")
        return demo(args.lanes, args.t, args.threads, args.scipy)
    return cache(args.action)


if __name__ == "__main__":
    sys.exit(main())
