"""Measure-preserving (Hamiltonised Gauss-Legendre) integration vs DOP853 at equal cost.

System: the Veselova body on SO(n) (seed 004 Section 4.2, inertia I(u ^ v) = Au ^ Av) with the
confining potential ``U = bpot (1 - gamma_n)``.  It stays a phi-simple Chaplygin system (phi
depends only on the metric, seed 004 Cor. 3.25(iii): the Hamiltonisation is weakly Noetherian),
and since ``U <= E`` along a motion, energies ``E <= bpot / 2`` keep ``gamma_n >= 1/2``: the
hemisphere chart is never left (checked on every output).

Measured per method, along ``L`` trajectories over ``t in [0, T]``:

* energy error ``|H(t) - H(0)| / |H(0)|``;
* measure defect: ``log det D Phi + log rho(x(t)) - log rho(x(0))`` for the numerical flow map
  ``Phi`` and the invariant density of the field it integrates -- ``rho = exp((r - 1) phi)`` in
  ``(s, p)`` for DOP853 on the reduced equations (3.17), ``rho = 1`` in ``(s, ptilde)`` for the
  Hamiltonised ``tau``-flow (Gauss).  ``D Phi`` comes from the variational equations over
  windows (``M = I`` at each window start); the defects of the windows add up to the defect of
  the whole map exactly (chain rule), which keeps ``det`` well conditioned over long runs.

Cost: right-hand-side evaluations of the integrated (variational) systems, as counted by the
core; DOP853's tolerance is calibrated on a short run so that its evaluations per unit time
match the Gauss run's.

``pytest benchmarks --benchmark-disable`` runs a small version (n = 4, short time) in seconds;
``python benchmarks/bench_measure_preserving.py`` produces the full figure (n = 4 and 8,
``T = 10^4``) in ``benchmarks/results/measure_preserving.{png,json}``.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import sympy as sp

os.environ.setdefault("NHFAST_CACHE_DIR", tempfile.mkdtemp(prefix="nhfast-bench-cache-"))

from nhfast.integrate import integrate  # noqa: E402
from nhfast.vectorfield import VectorField  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"


# ------------------------------------------------------------------ explicit systems ----


@dataclass
class VeselovaForms:
    """Closed forms (digest seed004.md 4.3(a), 4.3(d)) as vector fields, with variational ones.

    ``t_field``: states ``(s, p)``, reduced equations (3.17) in phi-simple form, observables
    ``energy`` and ``log_density`` (``(r - 1) phi``).  ``tau_field``: states
    ``(s, ptilde, t)``, canonical in ``(s, ptilde)`` with ``Htilde = N(s, ptilde)/2 + U`` and
    ``dt/dtau = exp(-phi) = c^{1/2}``; observable ``energy``.
    """

    n: int
    t_field: VectorField
    tau_field: VectorField

    @functools.cached_property
    def t_variational(self) -> VectorField:
        return self.t_field.variational()

    @functools.cached_property
    def tau_variational(self) -> VectorField:
        return self.tau_field.variational()


def veselova_forms(n: int, bpot: float = 1.0) -> VeselovaForms:
    """Explicit Veselova fields on the hemisphere chart with ``U = bpot (1 - gamma_n)``."""
    r = n - 1
    s = list(sp.symbols(f"s1:{n}", real=True))
    p = list(sp.symbols(f"p1:{n}", real=True))
    pt = list(sp.symbols(f"pt1:{n}", real=True))
    a = list(sp.symbols(f"a1:{n + 1}", positive=True))
    tt = sp.Symbol("t_phys", real=True)
    an = a[-1]
    c = an + sum((a[k] - an) * s[k] ** 2 for k in range(r))
    bb = 1 / an + sum((1 / a[k] - 1 / an) * s[k] ** 2 for k in range(r))

    def N(m: list) -> sp.Expr:
        s1 = sum(s[k] * m[k] for k in range(r))
        s2 = sum(s[k] * m[k] / a[k] for k in range(r))
        q1 = sum(m[k] ** 2 / a[k] for k in range(r))
        return q1 + bb * s1**2 - 2 * s1 * s2

    U = sp.Float(bpot) * (1 - sp.sqrt(1 - sum(x**2 for x in s)))
    H = N(p) / (2 * c) + U
    phi = -sp.log(c) / 2
    sdot = [sp.diff(H, x) for x in p]
    g = [sp.diff(phi, x) for x in s]
    gs = sum(g[j] * sdot[j] for j in range(r))
    ps = sum(p[j] * sdot[j] for j in range(r))
    pdot = [-sp.diff(H, s[i]) - p[i] * gs + g[i] * ps for i in range(r)]
    t_field = VectorField(
        states=[*s, *p],
        rhs=[*sdot, *pdot],
        params=a,
        observables={"energy": H, "log_density": (r - 1) * phi},
        name=f"veselova-{n} (t)",
    )
    Ht = N(pt) / 2 + U
    tau_field = VectorField(
        states=[*s, *pt, tt],
        rhs=[*[sp.diff(Ht, x) for x in pt], *[-sp.diff(Ht, x) for x in s], sp.sqrt(c)],
        params=a,
        observables={"energy": Ht},
        name=f"veselova-{n} (tau)",
    )
    return VeselovaForms(n, t_field, tau_field)


def initial_states(n: int, lanes: int, energy: float, seed: int = 0) -> tuple:
    """``(x0 (s, p), a)``: random inertia, ``|s| <= 0.3``, momenta scaled to ``energy``."""
    rng = np.random.default_rng(seed)
    r = n - 1
    a = np.sort(rng.uniform(1.0, 3.0, n))
    s = rng.uniform(-1, 1, (lanes, r))
    s *= 0.3 * rng.uniform(0, 1, (lanes, 1)) / np.linalg.norm(s, axis=1, keepdims=True)
    p = rng.normal(size=(lanes, r))
    forms = _forms(n)
    x = np.hstack([s, p])
    par = np.broadcast_to(a, (lanes, n))
    e = forms.t_field.evaluate("observables", x, params=par)[:, 0]
    u = 1 - np.sqrt(1 - np.sum(s**2, axis=1))
    p *= np.sqrt((energy - u) / (e - u))[:, None]
    return np.hstack([s, p]), a


_FORMS: dict[int, VeselovaForms] = {}


def _forms(n: int) -> VeselovaForms:
    if n not in _FORMS:
        _FORMS[n] = veselova_forms(n)
    return _FORMS[n]


# ---------------------------------------------------------------------- measurement ----


def _windowed(
    field: VectorField,
    variational: VectorField,
    x0: np.ndarray,
    a: np.ndarray,
    window: float,
    total: float,
    nz: int,
    log_density,
    t_stop: float | None = None,
    **kw,
) -> dict:
    """Run ``variational`` window by window; accumulate the log-det defect.

    Stops after ``total`` (in the field's own time) or, for the tau-field (whose last state is
    ``t``), as soon as every lane has reached ``t_stop``.
    """
    var = variational
    L, n = x0.shape
    x = x0.copy()
    t_axis, energy, defect, gam, evals = [0.0], [], [np.zeros(L)], [], np.zeros(L, dtype=np.int64)
    e0 = field.evaluate("observables", x, params=np.broadcast_to(a, (L, a.size)))[:, 0]
    cum = np.zeros(L)
    nwin = int(round(total / window))
    phys = []
    for _ in range(nwin):
        if t_stop is not None and x[:, -1].min() >= t_stop:
            break
        res = integrate(var, field.variational_initial(x), [0.0, window], params=a,
                        observables=False, **kw)  # fmt: skip
        xe, M = field.variational_split(res.y[:, -1])
        evals += res.stats["rhs_evals"]
        logdet = np.linalg.slogdet(M[:, :nz, :nz])[1]
        cum += logdet + log_density(xe, a) - log_density(x, a)
        x = xe
        e = field.evaluate("observables", x, params=np.broadcast_to(a, (L, a.size)))[:, 0]
        energy.append(np.abs(e - e0) / np.abs(e0))
        defect.append(cum.copy())
        gam.append(np.sqrt(1 - np.sum(x[:, : (nz // 2)] ** 2, axis=1)).min())
        phys.append(x[:, -1].copy() if n > nz else None)
        t_axis.append(t_axis[-1] + window)
    return {
        "axis": np.asarray(t_axis),
        "energy": np.vstack([np.zeros(L), *energy]),
        "defect": np.vstack(defect),
        "min gamma_n": float(min(gam)),
        "rhs_evals": evals,
        "t_phys": None if n == nz else np.vstack([np.zeros(L), *phys]),
    }


def _zero_density(x: np.ndarray, a: np.ndarray) -> np.ndarray:
    return np.zeros(x.shape[0])


def _t_density(n: int):
    def logrho(x: np.ndarray, a: np.ndarray) -> np.ndarray:
        s = x[:, : n - 1]
        c = a[-1] + np.sum((a[:-1] - a[-1]) * s**2, axis=1)
        return -(n - 2) / 2 * np.log(c)  # (r - 1) phi, phi = -1/2 ln c

    return logrho


def compare(n: int, lanes: int, total: float, h: float = 0.2, window: float = 10.0,
            energy: float = 0.4, seed: int = 0, loose_tol: float = 1e-9) -> dict:  # fmt: skip
    """Hamiltonised gauss6 (step ``h`` in tau) vs cost-matched DOP853 on Veselova ``n``."""
    forms = _forms(n)
    r = n - 1
    x0, a = initial_states(n, lanes, energy, seed)
    # Hamiltonised: tau windows; the tau span covering t = total from the slowest clock
    c0 = a[-1] + np.sum((a[:-1] - a[-1]) * x0[:, :r] ** 2, axis=1)
    z0 = np.hstack([x0[:, :r], x0[:, r:] / np.sqrt(c0)[:, None], np.zeros((lanes, 1))])
    rate = np.sqrt(a.min())  # dt/dtau = c^{1/2} >= sqrt(min a)
    for field in (forms.tau_variational, forms.t_variational):  # compile outside the timings
        field.compile(())
    tau_total = window * np.ceil(total / rate / window)  # an upper bound; stops at t = total
    t0 = time.perf_counter()
    ham = _windowed(forms.tau_field, forms.tau_variational, z0, a, window, tau_total, 2 * r,
                    _zero_density, t_stop=total, method="gauss6", h=h)  # fmt: skip
    t_ham = time.perf_counter() - t0
    t_of = ham["t_phys"]
    evals_per_t = float(np.mean(ham["rhs_evals"] / t_of[-1]))
    # DOP853: calibrate rtol on a short run to the same evaluations per unit time
    best = None
    for tol in 10.0 ** -np.arange(6, 15):
        cal = integrate(forms.t_variational, forms.t_field.variational_initial(x0),
                        [0.0, 5 * window], params=a, rtol=tol, atol=tol,
                        observables=False)  # fmt: skip
        ept = float(np.mean(cal.stats["rhs_evals"])) / (5 * window)
        if best is None or abs(np.log(ept / evals_per_t)) < abs(np.log(best[1] / evals_per_t)):
            best = (tol, ept)
    tol = best[0]
    t0 = time.perf_counter()
    dop = _windowed(forms.t_field, forms.t_variational, x0, a, window, total, 2 * r, _t_density(n),
                    method="dop853", rtol=tol, atol=tol)  # fmt: skip
    t_dop = time.perf_counter() - t0
    t0 = time.perf_counter()
    loose = _windowed(forms.t_field, forms.t_variational, x0, a, window, total, 2 * r,
                      _t_density(n), method="dop853", rtol=loose_tol, atol=loose_tol)  # fmt: skip
    t_loose = time.perf_counter() - t0
    gam_min = min(ham["min gamma_n"], dop["min gamma_n"], loose["min gamma_n"])
    if gam_min <= 0.0:
        raise RuntimeError("a trajectory left the hemisphere chart")
    out = {
        "n": n,
        "lanes": lanes,
        "T": total,
        "a": a.tolist(),
        "energy": energy,
        "min gamma_n over all outputs": gam_min,
        "hamiltonised": {
            "method": f"gauss6 in tau, h = {h}",
            "t": np.median(t_of, axis=1).tolist(),
            "t reached (min over lanes)": float(t_of[-1].min()),
            "max energy error": float(np.max(ham["energy"])),
            "max |measure defect|": float(np.max(np.abs(ham["defect"]))),
            "energy error series": np.max(ham["energy"], axis=1).tolist(),
            "defect series": np.max(np.abs(ham["defect"]), axis=1).tolist(),
            "rhs evals per unit t": evals_per_t,
            "wall s": t_ham,
        },
        "dop853": {
            "method": f"dop853 rtol = atol = {tol:g} (cost-matched)",
            "t": dop["axis"].tolist(),
            "max energy error": float(np.max(dop["energy"])),
            "max |measure defect|": float(np.max(np.abs(dop["defect"]))),
            "energy error series": np.max(dop["energy"], axis=1).tolist(),
            "defect series": np.max(np.abs(dop["defect"]), axis=1).tolist(),
            "rhs evals per unit t": float(np.mean(dop["rhs_evals"])) / total,
            "wall s": t_dop,
        },
        "dop853 loose": {
            "method": f"dop853 rtol = atol = {loose_tol:g} (cheaper)",
            "t": loose["axis"].tolist(),
            "max energy error": float(np.max(loose["energy"])),
            "max |measure defect|": float(np.max(np.abs(loose["defect"]))),
            "energy error series": np.max(loose["energy"], axis=1).tolist(),
            "defect series": np.max(np.abs(loose["defect"]), axis=1).tolist(),
            "rhs evals per unit t": float(np.mean(loose["rhs_evals"])) / total,
            "wall s": t_loose,
        },
    }
    return out


def plot(results: list[dict], path: Path) -> Path:
    """Energy error and measure defect vs t, both methods, one row per n."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(results), 2, figsize=(11, 3.6 * len(results)), squeeze=False)
    for row, res in zip(axes, results, strict=True):
        for ax, key, label in zip(
            row, ("energy error series", "defect series"),
            ("relative energy error", "|measure defect| (log det)"), strict=True,
        ):  # fmt: skip
            for meth, style in (("hamiltonised", "-"), ("dop853", "--"), ("dop853 loose", ":")):
                d = res[meth]
                y = np.maximum(np.asarray(d[key], dtype=float), 1e-17)
                ax.semilogy(d["t"], y, style, label=d["method"])
            ax.set_xlabel("t")
            ax.set_ylabel(label)
            ax.set_title(f"Veselova n = {res['n']}, {res['lanes']} trajectories")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# ------------------------------------------------------------------------ pytest part ----


def test_explicit_forms_match_the_generic_route():
    """The closed forms used here equal nhfast's generic Chaplygin route (n = 4)."""
    from nhfast.symbolic import time_changed_system
    from nhfast.symbolic.equations import chaplygin_equations
    from nhfast.systems import veselova

    n, r = 4, 3
    V = veselova(n, lambda g: 1 - g[-1])
    generic_t = chaplygin_equations(V, simplify=False).as_vector_field()
    generic_tau = time_changed_system(V).tau_field
    forms = _forms(n)
    rng = np.random.default_rng(7)
    x = np.hstack([rng.uniform(-0.4, 0.4, (6, r)), rng.normal(size=(6, r)), np.zeros((6, 1))])
    a = np.array([1.0, 1.7, 2.2, 2.9])
    got = forms.t_field.evaluate("rhs", x[:, :-1], params=a)
    np.testing.assert_allclose(got, generic_t.evaluate("rhs", x[:, :-1], params=a), atol=1e-13)
    got = forms.tau_field.evaluate("rhs", x, params=a)
    np.testing.assert_allclose(got, generic_tau.evaluate("rhs", x, params=a), atol=1e-13)


def test_measure_preserving_small(benchmark):
    """n = 4, 4 lanes, t = 60: the Hamiltonised run keeps the measure to round-off."""
    res = benchmark.pedantic(lambda: compare(4, 4, 60.0, window=10.0), rounds=1, iterations=1)
    ham, dop = res["hamiltonised"], res["dop853"]
    assert res["min gamma_n over all outputs"] > 0.5
    loose = res["dop853 loose"]
    assert ham["max energy error"] < 1e-7  # O(h^6) with h = 0.2, bounded (no drift)
    assert ham["max |measure defect|"] < 1e-12  # round-off: the tau-flow map is symplectic
    assert dop["max |measure defect|"] > ham["max |measure defect|"]
    assert loose["max |measure defect|"] > 100 * ham["max |measure defect|"]
    benchmark.extra_info.update({k: res[k] for k in ("n", "lanes", "T")})
    benchmark.extra_info.update(
        {f"{m} {k}": res[m][k] for m in ("hamiltonised", "dop853", "dop853 loose")
         for k in ("max energy error", "max |measure defect|", "rhs evals per unit t")}
    )  # fmt: skip


def main(argv: list[str]) -> int:
    total = float(argv[1]) if len(argv) > 1 else 1e4
    lanes = int(argv[2]) if len(argv) > 2 else 4
    results = []
    for n in (4, 8):
        t0 = time.perf_counter()
        res = compare(n, lanes, total)
        res["wall s total"] = time.perf_counter() - t0
        results.append(res)
        for m in ("hamiltonised", "dop853", "dop853 loose"):
            d = res[m]
            print(
                f"n={n} {d['method']}: max energy error {d['max energy error']:.2e}, "
                f"max |measure defect| {d['max |measure defect|']:.2e}, "
                f"rhs evals/t {d['rhs evals per unit t']:.0f}, wall {d['wall s']:.1f}s"
            )
        print(f"n={n} min gamma_n {res['min gamma_n over all outputs']:.3f}")
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "measure_preserving.json").write_text(json.dumps(results, indent=1))
    print(plot(results, RESULTS / "measure_preserving.png"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
