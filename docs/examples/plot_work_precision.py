"""
Work-precision: nhfast against heyoka and SciPy
===============================================

Time per trajectory against final-state error for the multi-dimensional Veselova body at
``n = 16`` (García-Naranjo, L. C. & Marrero, J. C. (2020), *The geometry of nonholonomic
Chaplygin systems revisited*, Section 4.2, with the inertia ``A Om A`` of their
Theorem 4.3), read from the saved benchmark results ``benchmarks/results/work_precision.json``
(``benchmarks/bench_work_precision.py``; measured on a 2-core Intel Xeon virtual machine with
AVX-512). The error is against a long-double heyoka Taylor reference at tolerance ``1e-19``.
Each curve is one implementation over a sweep of tolerances, at 10^3 trajectories and one
thread; SciPy's DOP853 runs a few trajectories with a NumPy right-hand side.
"""

import json
from pathlib import Path

import matplotlib.pyplot as plt


def results_file() -> Path:
    """``benchmarks/results/work_precision.json`` of the source tree this example is in."""
    here = Path(__file__).resolve() if "__file__" in globals() else Path.cwd()
    for parent in [here, *here.parents]:
        candidate = parent / "benchmarks" / "results" / "work_precision.json"
        if candidate.exists():
            return candidate
    raise FileNotFoundError("benchmarks/results/work_precision.json")


data = json.loads(results_file().read_text())
n, lanes = 16, 1000
curves = {
    "nhfast-taylor": ("nhfast Taylor", "C0", "o-"),
    "nhfast-dop853": ("nhfast DOP853", "C1", "s-"),
    "heyoka-batch": ("heyoka batch", "C2", "^--"),
    "heyoka-scalar": ("heyoka scalar", "C3", "v--"),
    "scipy": ("SciPy DOP853", "C7", "x:"),
}

fig, ax = plt.subplots(figsize=(6.4, 4.4))
for impl, (label, colour, style) in curves.items():
    runs = [
        r
        for r in data["runs"]
        if r["problem"] == "veselova"
        and r["n"] == n
        and r["impl"] == impl
        and r["threads"] == 1
        and r["lanes"] == (1 if impl == "scipy" else lanes)
    ]
    runs.sort(key=lambda r: r["error"])
    if runs:
        ax.loglog(
            [r["error"] for r in runs],
            [r["per_trajectory_seconds"] for r in runs],
            style,
            color=colour,
            label=label,
        )
ax.set_xlabel("final-state error")
ax.set_ylabel("seconds per trajectory")
ax.set_title(f"Veselova body, n = {n}, t = 10, one thread")
ax.legend()
fig.tight_layout()
plt.show()
