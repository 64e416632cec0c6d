"""Ensemble stores under faults (issue 35): nothing of the user's lost, nothing wrong read back.

A directory that is not an nhfast store is refused and left as it was (its files untouched,
with ``resume`` either way); a file or an unwritable place is refused by name. A chunk deleted,
truncated, emptied or overwritten after the run is found by :func:`open_store`, named, and
computed again by a resumed run, which then equals a local run bit for bit.
"""

from __future__ import annotations

import os
import stat

import numpy as np
import pytest
import zarr
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from references.states import sphere_states

import nhfast as nh
from nhfast.distributed import integrate_ensemble, open_store
from nhfast.errors import DamagedStoreError
from nhfast.systems import veselova

N = 4
A = 1.0 + np.arange(1, N + 1) / N
CHUNK = 20


def _states(lanes: int, seed: int) -> np.ndarray:
    """States on |gamma| = 1, gamma . m = 0 of the Veselova body at n = N."""
    return sphere_states(N, lanes, seed)


@pytest.fixture(scope="module")
def problem():
    vf = veselova(N, form="structured")
    x0 = _states(60, seed=3)
    t = np.linspace(0.0, 1.0, 3)
    return vf, x0, t, nh.integrate(vf, x0, t, params=A)


def _run(problem, client, store, **kw):
    vf, x0, t, _ = problem
    return integrate_ensemble(vf, x0, t, params=A, client=client, chunk=CHUNK, store=store, **kw)


def _snapshot(root) -> dict[str, bytes]:
    out = {}
    for dirpath, _, files in os.walk(root):
        for f in files:
            p = os.path.join(dirpath, f)
            with open(p, "rb") as fh:
                out[os.path.relpath(p, root)] = fh.read()
    return out


@pytest.mark.parametrize("resume", [True, False])
def test_a_foreign_directory_is_refused_and_left_alone(problem, client, tmp_path, resume):
    work = tmp_path / "thesis"
    (work / "chapters").mkdir(parents=True)
    (work / "notes.txt").write_text("three years of work")
    (work / "chapters" / "one.tex").write_text("\\chapter{One}")
    before = _snapshot(work)
    with pytest.raises(ValueError, match="store=.*not an nhfast ensemble store.*notes.txt"):
        _run(problem, client, work, resume=resume)
    assert _snapshot(work) == before


def test_a_zarr_group_of_someone_else_is_refused(problem, client, tmp_path):
    other = tmp_path / "other.zarr"
    zarr.open_group(str(other), mode="w").create_array("data", data=np.arange(5.0))
    before = _snapshot(other)
    with pytest.raises(ValueError, match="not an nhfast ensemble store"):
        _run(problem, client, other, resume=False)
    assert _snapshot(other) == before


def test_a_file_is_refused_by_name(problem, client, tmp_path):
    f = tmp_path / "results.zarr"
    f.write_text("not a directory")
    with pytest.raises(ValueError, match=r"store=.*results.zarr.* is a file: expected a directory"):
        _run(problem, client, f)
    assert f.read_text() == "not a directory"


@pytest.mark.skipif(os.geteuid() == 0 if hasattr(os, "geteuid") else True,
                    reason="root writes through permissions")  # fmt: skip
def test_an_unwritable_place_is_refused_by_name(problem, client, tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        with pytest.raises(PermissionError, match=r"store=.*not writable"):
            _run(problem, client, ro / "run.zarr")
    finally:
        ro.chmod(stat.S_IRWXU)


def test_an_unwritable_place_is_named_whoever_runs(problem, client, tmp_path, monkeypatch):
    """The same message when the permissions are read through os.access (root passes
    chmod, so the refusal is simulated there)."""
    real = os.access

    def access(path, mode, *a, **k):
        if str(path).startswith(str(tmp_path / "locked")) and mode & os.W_OK:
            return False
        return real(path, mode, *a, **k)

    (tmp_path / "locked").mkdir()
    monkeypatch.setattr(os, "access", access)
    with pytest.raises(PermissionError, match=r"store=.*cannot create it, .*locked.* not writable"):
        _run(problem, client, tmp_path / "locked" / "run.zarr")
    (tmp_path / "locked" / "empty").mkdir()
    with pytest.raises(PermissionError, match=r"store=.*empty.* is not writable"):
        _run(problem, client, tmp_path / "locked" / "empty")


def test_an_empty_directory_is_used(problem, client, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    got = _run(problem, client, empty)
    np.testing.assert_array_equal(np.asarray(got.y), problem[3].y)


def _chunk_files(store, array: str) -> list[str]:
    root = os.path.join(store, array, "c")
    files = []
    for dirpath, _, names in os.walk(root):
        files += [os.path.join(dirpath, n) for n in names]
    return sorted(files)


def _delete(path: str) -> None:
    os.remove(path)


def _truncate(path: str) -> None:
    with open(path, "rb") as fh:
        data = fh.read()
    with open(path, "wb") as fh:
        fh.write(data[: len(data) // 2])


def _empty(path: str) -> None:
    open(path, "wb").close()


def _overwrite(path: str) -> None:
    size = os.path.getsize(path)
    with open(path, "r+b") as fh:
        fh.seek(max(0, size // 2 - 16))
        fh.write(np.random.default_rng(0).bytes(32))


@pytest.mark.parametrize("fault", [_delete, _truncate, _empty, _overwrite])
@pytest.mark.parametrize("array", ["y", "observables", "stats"])
def test_a_damaged_chunk_is_found_named_and_recomputed(problem, client, tmp_path, fault, array):
    store = str(tmp_path / "run.zarr")
    _run(problem, client, store)
    files = _chunk_files(store, array)
    assert len(files) == 3  # 60 trajectories in chunks of 20
    fault(files[1])  # trajectories 20..39
    with pytest.raises(DamagedStoreError, match=rf"chunk 1 \(trajectories 20..39\) of {array}"):
        open_store(store)
    with pytest.warns(nh.IntegrationWarning, match="chunk 1, trajectories 20..39"):
        got = _run(problem, client, store)
    ref = problem[3]
    np.testing.assert_array_equal(np.asarray(got.y), ref.y)
    for k in ref.observables:
        np.testing.assert_array_equal(np.asarray(got.observables[k]), ref.observables[k])
    np.testing.assert_array_equal(np.asarray(open_store(store).y), ref.y)


def test_a_resumed_store_recomputes_only_damaged_chunks(problem, client, tmp_path):
    store = str(tmp_path / "run.zarr")
    _run(problem, client, store)
    group = zarr.open_group(store, mode="r")
    stamps = {f: os.path.getmtime(f) for f in _chunk_files(store, "y")}
    assert group.attrs["nhfast"]["complete"]
    got = _run(problem, client, store)  # nothing damaged: nothing to do
    assert {f: os.path.getmtime(f) for f in _chunk_files(store, "y")} == stamps
    np.testing.assert_array_equal(np.asarray(got.y), problem[3].y)


def test_client_must_be_a_client(problem):
    vf, x0, t, _ = problem
    for bad in (None, "tcp://127.0.0.1:8786"):
        with pytest.raises(TypeError, match="client must be a dask.distributed Client"):
            integrate_ensemble(vf, x0, t, params=A, client=bad)


@settings(
    max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    chunk=st.integers(7, 40),
    array=st.sampled_from(["y", "observables", "status", "stats"]),
    fault=st.sampled_from([_delete, _truncate, _empty, _overwrite]),
    pick=st.integers(0, 10**6),
)
def test_any_fault_in_any_chunk_is_found_and_repaired(problem, client, tmp_path_factory, chunk,
                                                     array, fault, pick):  # fmt: skip
    """Property: whatever the chunk size, array and fault, open_store names the damaged chunk
    and a resumed run restores the local run's bits."""
    vf, x0, t, ref = problem
    store = str(tmp_path_factory.mktemp("prop") / "run.zarr")
    integrate_ensemble(vf, x0, t, params=A, client=client, chunk=chunk, store=store)
    files = _chunk_files(store, array)
    if not files:  # all fill values (status 0 everywhere): Zarr writes no chunk, none to damage
        return
    target = files[pick % len(files)]
    index = (
        int(os.path.basename(target))
        if array in ("status",)
        else int(os.path.relpath(target, os.path.join(store, array, "c")).split(os.sep)[0])
    )
    fault(target)
    if fault is _overwrite and os.path.getsize(target) == 0:
        return
    with pytest.raises(DamagedStoreError, match=rf"chunk {index} \("):
        open_store(store)
    with pytest.warns(nh.IntegrationWarning, match=rf"chunk {index},"):
        got = integrate_ensemble(vf, x0, t, params=A, client=client, chunk=chunk, store=store)
    np.testing.assert_array_equal(np.asarray(got.y), ref.y)
    np.testing.assert_array_equal(got.status, ref.status)


def test_gathering_beyond_memory_is_refused_before_running(problem, client, monkeypatch):
    from nhfast.errors import InsufficientMemoryError

    vf, _, _, _ = problem
    monkeypatch.setenv("NHFAST_MEMORY_LIMIT", str(10**8))
    x0 = _states(5, seed=1)
    t = np.linspace(0.0, 1.0, 400_000)
    with pytest.raises(InsufficientMemoryError, match=r"gathering 5 trajectories .* pass store="):
        integrate_ensemble(vf, x0, t, params=A, client=client)
