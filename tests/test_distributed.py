"""Ensembles on a Dask cluster (issue 13): the same result as a local run, bit for bit.

One small ``LocalCluster`` (two single-threaded worker processes) serves the module. The
reference of every test is :func:`nhfast.integrate` in this process; trajectories are
independent lanes, so any chunking must reproduce it exactly. A worker killed mid-run
(SIGKILL) must lose nothing; a store written chunk by chunk must resume where it stopped.
"""

from __future__ import annotations

import os
import signal
import time

import dask.array as da
import numpy as np
import pytest
import sympy as sp
import zarr
from distributed import Client
from references.states import sphere_states

import nhfast as nh
from nhfast import systems
from nhfast.distributed import integrate_ensemble, open_store, system_hash

N = 4
A = 1.0 + np.arange(1, N + 1) / N  # a_i = 1 + i/n


def initial_states(lanes: int, seed: int) -> np.ndarray:
    """States on |gamma| = 1, gamma . m = 0 of the Veselova body at n = N."""
    return sphere_states(N, lanes, seed)


@pytest.fixture(scope="module")
def veselova():
    return systems.veselova(N, form="structured")


def assert_same(got: nh.IntegrationResult, ref: nh.IntegrationResult) -> None:
    np.testing.assert_array_equal(got.t, ref.t)
    np.testing.assert_array_equal(np.asarray(got.y), ref.y)
    np.testing.assert_array_equal(got.status, ref.status)
    assert list(got.stats) == list(ref.stats)
    for k in ref.stats:
        np.testing.assert_array_equal(got.stats[k], ref.stats[k])
    assert list(got.observables) == list(ref.observables)
    for k in ref.observables:
        np.testing.assert_array_equal(np.asarray(got.observables[k]), ref.observables[k])
    assert got.method == ref.method
    reached = getattr(ref, "t_reached", None)  # where the integrator reports it
    if reached is not None:
        np.testing.assert_array_equal(got.t_reached, reached)


def test_chunks_reproduce_a_local_run(client, veselova) -> None:
    x0 = initial_states(300, seed=1)
    t = np.linspace(0.0, 2.0, 4)
    ref = nh.integrate(veselova, x0, t, params=A)
    seen = []
    got = integrate_ensemble(
        veselova, x0, t, params=A, client=client, chunk=70, progress=lambda d, n: seen.append(d)
    )
    assert_same(got, ref)
    assert seen == [0, 1, 2, 3, 4, 5]  # 300 trajectories in chunks of 70
    # integrate takes no cluster: one entry point for a run on one
    with pytest.raises(TypeError, match="client"):
        nh.integrate(veselova, x0, t, params=A, client=client, chunk=128)


def test_results_relayed_by_the_scheduler_are_the_same(client, veselova) -> None:
    """Results come from the workers directly, or through the scheduler for a client made
    with ``direct_to_workers=False`` (workers it cannot reach): the same either way."""
    x0 = initial_states(120, seed=7)
    t = [0.0, 1.0]
    ref = nh.integrate(veselova, x0, t, params=A)
    with Client(client.scheduler.address, direct_to_workers=False) as relayed:
        assert_same(integrate_ensemble(veselova, x0, t, params=A, client=relayed, chunk=50), ref)
    assert_same(integrate_ensemble(veselova, x0, t, params=A, client=client, chunk=50), ref)


def test_dask_inputs_and_per_trajectory_params(client, veselova) -> None:
    x0 = initial_states(200, seed=2)
    par = A * np.linspace(0.9, 1.1, 200)[:, None]
    t = np.array([0.0, 1.0])
    ref = nh.integrate(veselova, x0, t, params=par, method="dopri5", rtol=1e-8)
    got = integrate_ensemble(
        veselova,
        da.from_array(x0, chunks=(33, 2 * N)),
        t,
        params=da.from_array(par, chunks=(50, N)),
        method="dopri5",
        rtol=1e-8,
        client=client,
        chunk=64,
    )
    assert_same(got, ref)
    # numpy params rows split with numpy x0
    assert_same(
        integrate_ensemble(
            veselova, x0, t, params=par, method="dopri5", rtol=1e-8, client=client, chunk=64
        ),
        ref,
    )


def test_store_resumes_from_written_chunks(client, veselova, tmp_path) -> None:
    x0 = initial_states(250, seed=3)
    t = np.linspace(0.0, 1.0, 3)
    ref = nh.integrate(veselova, x0, t, params=A)
    store = tmp_path / "run.zarr"
    got = integrate_ensemble(veselova, x0, t, params=A, client=client, chunk=60, store=store)
    assert isinstance(got.y, da.Array)
    assert_same(got, ref)
    group = zarr.open_group(str(store), mode="r")
    head = group.attrs["nhfast"]
    assert head["system_hash"] == system_hash(veselova) and head["complete"] is True
    assert head["settings"]["method"] == "dop853" and head["settings"]["n_traj"] == 250
    arrays = {"checksums", "done", "observables", "stats", "status", "t", "y"}
    assert set(group) - arrays <= {"t_reached"} and arrays <= set(group)
    assert_same(open_store(store), ref)
    seen = []
    again = integrate_ensemble(
        veselova, x0, t, params=A, client=client, chunk=60, store=store,
        progress=lambda d, n: seen.append(d),
    )  # fmt: skip
    assert seen == [5]  # every chunk was done: nothing ran
    assert_same(again, ref)

    # an interrupted run: chunks 1 and 4 not marked done, their rows garbage
    group = zarr.open_group(str(store), mode="r+")
    group["done"][1] = 0
    group["done"][4] = 0
    group["y"][60:120] = np.nan
    group["y"][240:250] = -1.0
    group.attrs["nhfast"] = {**group.attrs["nhfast"], "complete": False}
    with pytest.raises(ValueError, match="unfinished"):
        open_store(store)
    seen = []
    got = integrate_ensemble(
        veselova, x0, t, params=A, client=client, chunk=60, store=store,
        progress=lambda d, n: seen.append((d, n)),
    )  # fmt: skip
    assert seen == [(3, 5), (4, 5), (5, 5)]  # only the two missing chunks ran
    assert_same(got, ref)

    # another problem in the same store is refused, unless resume=False
    with pytest.raises(ValueError, match="another run.*rtol"):
        integrate_ensemble(
            veselova, x0, t, params=A, rtol=1e-9, client=client, chunk=60, store=store
        )
    ref9 = nh.integrate(veselova, x0, t, params=A, rtol=1e-9)
    got = integrate_ensemble(
        veselova, x0, t, params=A, rtol=1e-9, client=client, chunk=60, store=store, resume=False
    )
    assert_same(got, ref9)


class Interrupt(Exception):
    pass


def test_interrupted_client_resumes_from_the_store(client, veselova, tmp_path) -> None:
    """The client stops after two chunks (an exception in its loop); calling again with the
    same arguments runs only the chunks not marked done and gives the full result."""
    x0 = initial_states(240, seed=7)
    t = np.linspace(0.0, 2.0, 3)
    store = tmp_path / "cut.zarr"

    def stop_after_two(done: int, total: int) -> None:
        if done == 2:
            raise Interrupt

    with pytest.raises(Interrupt):
        integrate_ensemble(
            veselova, x0, t, params=A, client=client, chunk=20, store=store,
            progress=stop_after_two,
        )  # fmt: skip
    seen = []
    got = integrate_ensemble(
        veselova, x0, t, params=A, client=client, chunk=20, store=store,
        progress=lambda d, n: seen.append(d),
    )  # fmt: skip
    assert 2 <= seen[0] < 12  # the written chunks were kept
    assert_same(got, nh.integrate(veselova, x0, t, params=A))


def blowup() -> nh.VectorField:
    """x' = x^2: x(t) = x0 / (1 - x0 t) leaves every bound at t = 1/x0."""
    x = sp.Symbol("x")
    return nh.VectorField([x], [x**2], observables={"x2": x**2}, name="blow-up")


def test_failed_trajectories_are_reported_like_a_local_run(client) -> None:
    vf = blowup()
    x0 = np.linspace(0.2, 2.0, 40)[:, None]  # x0 > 1 fails before t = 1
    t = np.array([0.0, 1.0])
    with pytest.raises(nh.IntegrationError) as local:
        nh.integrate(vf, x0, t)
    with pytest.raises(nh.IntegrationError) as remote:
        integrate_ensemble(vf, x0, t, client=client, chunk=7)
    assert str(remote.value) == str(local.value)
    with pytest.warns(nh.IntegrationWarning):
        ref = nh.integrate(vf, x0, t, keep_failed=True)
    with pytest.warns(nh.IntegrationWarning, match="trajectories failed"):
        got = integrate_ensemble(vf, x0, t, client=client, chunk=7, keep_failed=True)
    assert 0 < np.count_nonzero(got.failed) < 40
    assert_same(got, ref)


def test_worker_killed_mid_run_loses_nothing(client, veselova) -> None:
    """SIGKILL one worker (by its PID) while it integrates a chunk: the scheduler reruns its
    chunks elsewhere and the result equals the undisturbed run bit for bit."""
    x0 = initial_states(600, seed=4)
    t = np.linspace(0.0, 20.0, 3)  # chunks of about 0.05 s: the kill hits one mid-task
    ref = nh.integrate(veselova, x0, t, params=A)
    pids = client.run(os.getpid)
    killed = []

    def kill_after_first(done: int, total: int) -> None:
        if done == 1 and not killed:
            busy = [w for w, tasks in client.processing().items() if tasks]
            victim = busy[0] if busy else next(iter(pids))
            os.kill(pids[victim], signal.SIGKILL)
            killed.append(pids[victim])

    got = integrate_ensemble(
        veselova, x0, t, params=A, client=client, chunk=50, progress=kill_after_first
    )
    assert killed, "no worker was killed"
    assert_same(got, ref)
    deadline = time.time() + 30  # the scheduler forgets the dead worker (its nanny restarts it)
    while killed[0] in client.run(os.getpid).values() and time.time() < deadline:
        time.sleep(0.2)
    assert killed[0] not in client.run(os.getpid).values()


@pytest.mark.slow
def test_a_million_trajectories_streamed_to_zarr(client, veselova, tmp_path) -> None:
    """10^6 trajectories to t = 1 streamed to a store; a sample of chunks against local runs."""
    lanes, chunk = 1_000_000, 50_000
    x0 = da.from_array(initial_states(lanes, seed=5), chunks=(chunk, 2 * N))
    t = np.linspace(0.0, 1.0, 3)
    got = integrate_ensemble(
        veselova, x0, t, params=A, client=client, chunk=chunk, store=tmp_path / "big.zarr",
        observables=False,
    )  # fmt: skip
    assert got.y.shape == (lanes, 3, 2 * N) and got.success
    x = np.asarray(x0)
    for s in (0, 470_000, lanes - 1000):
        ref = nh.integrate(veselova, x[s : s + 1000], t, params=A, observables=False)
        np.testing.assert_array_equal(np.asarray(got.y[s : s + 1000]), ref.y)
        np.testing.assert_array_equal(got.stats["steps"][s : s + 1000], ref.stats["steps"])


def test_runner_integrates_its_batch_on_the_cluster(client, veselova, capsys) -> None:
    """The CLI's batch (``integrate_in_chunks``) with a client: chunks as tasks, a bar over
    chunks, failures kept; the same result as its local path."""
    from nhfast.experiments.runner import integrate_in_chunks

    x0 = initial_states(100, seed=6)
    t = np.linspace(0.0, 1.0, 3)
    args = (veselova, x0, t, A, "dop853", 1, 1e-10, 1e-12, None)
    ref = integrate_in_chunks(*args, False)
    got = integrate_in_chunks(*args, True, client, 32)
    assert_same(got, ref)
    assert "4/4" in capsys.readouterr().err  # the bar counted the four chunks


def test_cli_takes_a_scheduler_or_workers_not_both(capsys) -> None:
    from nhfast.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["run", "particle", "--workers", "2", "--scheduler", "tcp://127.0.0.1:1"])
    assert exc.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err
