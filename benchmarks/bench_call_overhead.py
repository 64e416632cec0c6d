"""Per-call cost of ``nh.integrate`` for one trajectory and one step (issue 12, item 4).

On compiled, cached systems -- the structured Veselova body ``veselova(n, form="structured")`` at
n = 4, 16, 64 (states ``2n``, ``n`` positive parameters, two domain conditions, five
observables) and a small unrolled oscillator -- three measurements per system and method
(``dop853``; ``rk4`` with ``h`` = the step):

* ``test_call`` -- ``nh.integrate(vf, x0, [0, h], params=a, method=...)`` as a user calls it
  (package wrapper, argument checks, the C driver, observables, the result);
* ``test_call_module`` -- the same through ``nhfast.integrate.integrate`` (no package wrapper);
* ``test_core`` -- the compiled work alone: ``_core.integrate_batch`` on prepared arrays as
  ``integrate`` hands them over (the rhs on derived parameters; with ``taylor``, the
  domain's conditions as terminal events), the floor of a call (the observables are
  computed on the first access of ``result.observables``, not in the call);
* ``test_call_observables`` -- ``nh.integrate`` and then ``result.observables`` (one more
  kernel call);
* ``test_call_front_end`` -- calls the compiled prepared call cannot take, run by the Python
  call object (``nhfast._call.Call``) on the oscillator with a ``nonnegative`` parameter: a
  kept call object (``dop853``, ``rk4``), and one built per call (``dop853`` with a
  ``dense=True`` event: events are a sequence, never kept).

``extra_info`` holds ``n``, ``method`` and ``part``; the Python time of a call is ``test_call``
(or ``test_call_module``) minus ``test_core`` of the same group (``call-<system>-<method>``).

Run (one file, a few seconds; on a shared machine CPU time is steadier than wall time)::

    NHFAST_CACHE_DIR=... pytest benchmarks/bench_call_overhead.py -p no:randomly \\
        --benchmark-timer=time.process_time --benchmark-json=benchmarks/results/call_overhead.json
"""

from __future__ import annotations

import sys

import numpy as np
import pytest
import sympy as sp

import nhfast as nh
from nhfast import _core
from nhfast.events import EventRecord, domain_watch, event_kernel
from nhfast.systems import veselova
from nhfast.systems.veselova_body.embedded import join_state

H = 1e-3
T = [0.0, H]
METHOD_OPTIONS = {"dop853": {}, "rk4": {"h": H}, "taylor": {}}


def _oscillator():
    q, p = sp.symbols("q p")
    k = sp.Symbol("k", positive=True)
    vf = nh.VectorField(
        [q, p], [p, -k * q], params=[k], observables={"energy": (p**2 + k * q**2) / 2},
        name="oscillator",
    )  # fmt: skip
    return vf, np.array([1.0, 0.0]), np.array([2.0])


def _veselova(n: int):
    vf = veselova(n, form="structured")
    x0 = join_state(np.eye(n)[-1], 0.1 * np.eye(n)[0])
    return vf, x0, np.linspace(1.0, 2.0, n)


SYSTEMS = {"veselova4": 4, "veselova16": 16, "veselova64": 64, "oscillator": 0}


@pytest.fixture(scope="module", params=list(SYSTEMS))
def case(request):
    n = SYSTEMS[request.param]
    vf, x0, a = _veselova(n) if n else _oscillator()
    nh.integrate(vf, x0, T, params=a)  # compiles (or loads) the kernels
    nh.integrate(vf, x0, T, params=a, method="taylor")
    return request.param, n, vf, x0, a


def _info(benchmark, name, n, vf, method, part):
    benchmark.group = f"call-{name}-{method}"
    benchmark.extra_info.update(
        system=name, n=n, n_state=vf.n_state, method=method, part=part, trajectories=1, steps=1
    )


@pytest.mark.parametrize("method", list(METHOD_OPTIONS))
def test_call(benchmark, case, method):
    name, n, vf, x0, a = case
    _info(benchmark, name, n, vf, method, "nh.integrate")
    kw = METHOD_OPTIONS[method]
    res = benchmark.pedantic(
        lambda: nh.integrate(vf, x0, T, params=a, method=method, **kw),
        rounds=100, iterations=10, warmup_rounds=2,
    )  # fmt: skip
    assert res.success and res.y.shape == (1, 2, vf.n_state)


@pytest.mark.parametrize("method", ["dop853"])
def test_call_observables(benchmark, case, method):
    name, n, vf, x0, a = case
    _info(benchmark, name, n, vf, method, "nh.integrate + observables")

    def run():
        res = nh.integrate(vf, x0, T, params=a, method=method)
        return res, res.observables

    res, obs = benchmark.pedantic(run, rounds=100, iterations=10, warmup_rounds=2)
    assert set(obs) == set(vf.observables) and obs["energy"].shape == (1, 2)


@pytest.mark.parametrize(
    ("path", "kw"),
    [("kept-dop853", {"method": "dop853"}), ("kept-rk4", {"method": "rk4", "h": H}),
     ("built-events", {"method": "dop853", "dense": True, "events": "q"})],
)  # fmt: skip
def test_call_front_end(benchmark, path, kw):
    q, p = sp.symbols("q p")
    k = sp.Symbol("k", nonnegative=True)  # no prepared call: the plan checks positive or free
    vf = nh.VectorField([q, p], [p, -k * q], params=[k], name="oscillator-nonnegative",
                        observables={"energy": (p**2 + k * q**2) / 2})  # fmt: skip
    if "events" in kw:
        kw = {**kw, "events": [(q, 0, False)]}
    x0, a = np.array([1.0, 0.0]), np.array([2.0])
    benchmark.group = "call-front-end"
    benchmark.extra_info.update(system="oscillator", n=0, n_state=2, method=kw["method"],
                                part=path, trajectories=1, steps=1)  # fmt: skip
    res = benchmark.pedantic(
        lambda: nh.integrate(vf, x0, T, params=a, **kw),
        rounds=100, iterations=10, warmup_rounds=2,
    )  # fmt: skip
    assert res.success


@pytest.mark.parametrize("method", list(METHOD_OPTIONS))
def test_call_module(benchmark, case, method):
    name, n, vf, x0, a = case
    _info(benchmark, name, n, vf, method, "nhfast.integrate.integrate")
    run = sys.modules["nhfast.integrate"].integrate
    kw = METHOD_OPTIONS[method]
    res = benchmark.pedantic(
        lambda: run(vf, x0, T, params=a, method=method, **kw),
        rounds=100, iterations=10, warmup_rounds=2,
    )  # fmt: skip
    assert res.success


@pytest.mark.parametrize("method", list(METHOD_OPTIONS))
def test_core(benchmark, case, method):
    """The compiled part of a call alone (integration and observables on prepared arrays)."""
    name, n, vf, x0, a = case
    _info(benchmark, name, n, vf, method, "core")
    mod = sys.modules["nhfast.integrate"]
    cs = vf.compile(("observables",))
    cap, ctx, derive, nderived = cs.integrator_rhs()  # as integrate takes it
    if method == "taylor":  # the kernel integrate takes at the default tolerance's order
        tcap = vf.compile_taylor(_core.taylor_order(0, 1e-10, 1e-12)).kernels["taylor"][0]
    else:
        tcap = None
    if tcap is not None:
        cap, derive, nderived = None, None, 0
    ns = vf.n_state
    t = np.array(T)
    x = x0.reshape(1, ns).copy()
    par = a.reshape(1, -1).copy()
    y = np.empty((1, 2, ns))
    status = np.zeros(1, dtype=np.int32)
    stats = np.zeros((1, _core.NSTATS), dtype=np.int64)
    t_end = np.empty(1)
    x_end = np.empty((1, ns)) if vf.domain else None
    h = METHOD_OPTIONS[method].get("h", 0.0)
    nstiff = mod.NSTIFF if method in mod.ADAPTIVE and method != "taylor" else 0
    events = None
    if method == "taylor" and vf.domain:  # the domain's conditions as terminal events
        watch = domain_watch(vf, None)
        ev_cap, ev_ctx = event_kernel(vf, watch.spec[0])
        record = EventRecord.empty(1, 1, ns)
        count = record.count
        events = (ev_cap, ev_ctx, watch.spec[1], watch.spec[2], record.t, record.which,
                  record.y, count)  # fmt: skip

    def run():
        if events is not None:
            count[0] = 0
        _core.integrate_batch(
            cap, ctx, ns, par.shape[1], 0, mod.METHODS[method], t, x, par, y, status, stats,
            1e-10, 1e-12, h, 0.0, 10_000_000, 1e-14, 100, 1, 64, nstiff=nstiff, t_end=t_end,
            taylor=tcap, x_end=x_end, events=events, derive=derive, nderived=nderived,
        )  # fmt: skip

    benchmark.pedantic(run, rounds=100, iterations=10, warmup_rounds=2)
    ref = nh.integrate(vf, x0, T, params=a, method=method, **METHOD_OPTIONS[method])
    assert np.array_equal(y, ref.y)
