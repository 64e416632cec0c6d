"""Ensembles of trajectories on a Dask cluster, gathered in memory or streamed to Zarr.

:func:`integrate_ensemble` splits the trajectories into chunks and runs one
:func:`nhfast.integrate.integrate` task per chunk on the workers of a ``dask.distributed``
client. The system travels pickled, with the C source of its compiled kernels (see
:meth:`nhfast.vectorfield.VectorField.__getstate__`): a worker compiles it into its own kernel
cache, or loads it from there, on first use. Trajectories are independent lanes of the batch
integrator, so the result equals a local run bit for bit, whatever the chunk size.

With ``store=`` every task writes its chunk into a Zarr group and marks it complete; the
result's ``y`` and ``observables`` are then Dask arrays over the store. A run interrupted
(client gone, cluster gone) resumes from the chunks marked complete when called again with the
same arguments. A worker that dies mid-run loses nothing: the scheduler reruns its tasks.

Needs the optional dependencies ``dask[distributed]`` (and ``zarr`` >= 3 for ``store=``).

Zarr layout (format 2)
----------------------
``t`` (n_t,), ``y`` (n_traj, n_t, n_state), ``observables`` (n_traj, n_t, n_obs; its attribute
``names``), ``status`` (n_traj,) int32, ``t_reached`` (n_traj,) (where the integrator reports
it), ``stats`` (n_traj, n_stats) int64 (attribute ``names``), ``checksums`` (n_chunks, k)
int64: a checksum of each chunk's values in each of the ``k`` arrays of its attribute
``arrays``, and ``done`` (n_chunks,) uint8: 1 once a chunk and its checksums are written.
Group attributes ``nhfast``: ``format``, ``version``, ``system`` (name), ``system_hash``,
``settings`` (method, tolerances, sizes, chunk, tokens of x0 and params) and ``complete``.

What nhfast writes and reads is guarded: a directory that is neither new, empty nor an nhfast
store (with nothing else in it) is refused, never cleared; every chunk read back by
:func:`open_store` or by a resumed run is checked against its checksums (a deleted,
truncated or overwritten chunk raises :class:`~nhfast.errors.DamagedStoreError` naming it, and
a resumed run computes it again).
"""

from __future__ import annotations

import os
import pickle
import threading
import uuid
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from nhfast import _keys
from nhfast._abi import STATS
from nhfast._memory import check as check_memory
from nhfast._validate import is_dask_array, output_times, params_rows, positive_int, state_rows
from nhfast._version import __version__
from nhfast.errors import DamagedStoreError, IntegrationWarning
from nhfast.integrate import HAMILTONISED, METHODS, IntegrationResult, integrate, report_failures
from nhfast.vectorfield import VectorField

__all__ = [
    "integrate_ensemble",
    "open_store",
]

#: Version of the Zarr layout written by :func:`integrate_ensemble`.
FORMAT = 2
#: The members of a store (anything else in its directory makes it someone else's).
_MEMBERS = frozenset(
    {"zarr.json", "t", "y", "observables", "status", "t_reached", "stats", "checksums", "done"}
)
#: Options of ``integrate`` that change results (recorded in the store, checked on resume).
_RESULT_OPTIONS = ("max_steps", "hmax", "tol", "max_iter", "stiffness_check")
#: Whether this nhfast's IntegrationResult reports the time each trajectory reached.
_HAS_T_REACHED = "t_reached" in IntegrationResult.__dataclass_fields__
_OTHER_OPTIONS = ("keep_failed", "block")
#: Gather results from the workers directly (False: through the scheduler, Dask's default).
_DIRECT = True

# --------------------------------------------------------------------- worker side ----
_systems: dict[str, VectorField] = {}
_systems_lock = threading.Lock()


def _worker_system(key: str, payload: bytes) -> VectorField:
    """The system of hash ``key``, unpickled once per worker process."""
    with _systems_lock:
        system = _systems.get(key)
        if system is None:
            system = _systems[key] = pickle.loads(payload)
    return system


def _run_chunk(
    key: str,
    payload: bytes,
    x: np.ndarray,
    par: np.ndarray | None,
    t: np.ndarray,
    options: dict[str, Any],
    store: Any,
    index: int,
    start: int,
) -> tuple[np.ndarray, ...] | None:
    """One task: integrate a chunk (failures kept), return it or write it to ``store``."""
    system = _worker_system(key, payload)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", IntegrationWarning)  # the client reports failures
        res = integrate(system, x, t, params=par, keep_failed=True, **options)
    stats = np.stack([res.stats[k] for k in STATS], axis=1)
    obs = _stack_observables(res)
    if store is None:
        return res.y, obs, res.status, stats, getattr(res, "t_reached", None)
    import zarr

    group = zarr.open_group(store, mode="r+")
    stop = start + x.shape[0]
    parts = {"y": res.y, "observables": obs, "status": res.status,
             "t_reached": getattr(res, "t_reached", None), "stats": stats}  # fmt: skip
    names = group["checksums"].attrs["arrays"]
    for name in names:
        group[name][start:stop] = parts[name]
    group["checksums"][index] = [_keys.array_checksum(parts[name]) for name in names]
    group["done"][index] = 1  # last: the chunk counts as written only now
    return None


def _stack_observables(res: IntegrationResult) -> np.ndarray | None:
    if not res.observables:
        return None
    return np.stack(list(res.observables.values()), axis=-1)


# --------------------------------------------------------------------- client side ----
def system_hash(system: VectorField) -> str:
    """:func:`nhfast._keys.system_key` of the system: the C source of its compiled kernels
    (compiling them if needed), else its pickled symbolic description."""
    built = system.compile(("observables",) if system.observables else ())
    return _keys.system_key(built.source.encode() if built.source else pickle.dumps(system))


def integrate_ensemble(
    system: VectorField,
    x0: Any,
    t_eval: Any,
    method: str = "dop853",
    rtol: float = 1e-10,
    atol: float = 1e-12,
    params: Any = None,
    h: float | None = None,
    threads: int = 1,
    observables: bool = True,
    *,
    client: Any,
    chunk: int = 10_000,
    store: Any = None,
    resume: bool = True,
    progress: Callable[[int, int], object] | None = None,
    **options: Any,
) -> IntegrationResult:
    """:func:`nhfast.integrate.integrate` on a Dask cluster, one task per chunk of trajectories.

    Parameters
    ----------
    system : VectorField
        Any field :func:`~nhfast.integrate.integrate` accepts (pickled to the workers with
        its kernels' C source).
    x0 : array_like or dask.array.Array, shape (n_traj, n_state)
        Initial states. A NumPy array's chunks go into the task graph (through the
        scheduler); a Dask array is rechunked to ``chunk`` rows and never gathered: use one
        (``dask.array.from_zarr``, say) for inputs larger than the client's memory.
    t_eval, method, rtol, atol, h, threads, observables
        As for :func:`~nhfast.integrate.integrate` (``threads``: per task).
    params : array_like or dask.array.Array, optional
        One row ``(n_params,)`` for all trajectories, or ``(n_traj, n_params)``, split with
        ``x0``.
    client : distributed.Client
        The cluster to run on. Results come from the workers directly, not relayed by the
        scheduler, unless the client was made with ``direct_to_workers=False`` (workers it
        cannot reach).
    chunk : int
        Trajectories per task.
    store : str, os.PathLike or zarr store, optional
        Write the result there (see the module's layout) instead of gathering it; workers
        must reach it (a path on a shared file system).
    resume : bool
        With ``store``: keep the chunks an earlier run of the same problem marked complete
        (a store holding another problem is refused); False overwrites the store.
    progress : callable, optional
        Called as ``progress(done, total)`` after each chunk.
    **options
        ``max_steps``, ``hmax``, ``tol``, ``max_iter``, ``stiffness_check``,
        ``keep_failed``, ``block`` of :func:`~nhfast.integrate.integrate`.

    Returns
    -------
    IntegrationResult
        The same as a local run, bit for bit; with ``store``, ``y``, the observables and the
        stats are Dask arrays over the store (``status`` and ``t`` in memory).

    Raises
    ------
    TypeError, ValueError
        On bad arguments (a task's ``ValueError`` is raised here too), or a store holding
        another problem with ``resume=True``.
    IntegrationError
        When a trajectory fails and ``keep_failed`` is False (after every chunk ran).

    Examples
    --------
    >>> from distributed import Client, LocalCluster  # doctest: +SKIP
    >>> client = Client(LocalCluster(n_workers=2, threads_per_worker=1))  # doctest: +SKIP
    >>> res = integrate_ensemble(vf, x0, [0.0, 10.0], params=a, client=client,
    ...                          chunk=10_000, store="run.zarr")  # doctest: +SKIP
    """
    if not all(hasattr(client, a) for a in ("map", "gather", "compute", "cancel")):
        hint = (
            " (a scheduler's address: pass distributed.Client(address))"
            if isinstance(client, str)
            else ""
        )
        raise TypeError(
            f"client must be a dask.distributed Client, got {type(client).__name__} "
            f"{client!r}{hint}"
        )
    unknown = set(options) - set(_RESULT_OPTIONS) - set(_OTHER_OPTIONS)
    if unknown:
        raise TypeError(f"integrate_ensemble got unexpected options: {', '.join(sorted(unknown))}")
    if not isinstance(system, VectorField):
        raise TypeError(f"system must be a VectorField, got {type(system).__name__}")
    if method in HAMILTONISED or method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}; got {method!r}")
    chunk = positive_int(chunk, "chunk")
    n = system.n_state
    t = output_times(t_eval, "t_eval")
    if is_dask_array(x0):
        if x0.ndim != 2 or x0.shape[1] != n:
            raise ValueError(f"x0 must have shape (n_traj, {n}); got {x0.shape}")
        ntraj = int(x0.shape[0])
    else:
        x0 = state_rows(x0, n, "x0")
        ntraj = x0.shape[0]
    if is_dask_array(params):
        if params.shape != (ntraj, system.n_params):
            raise ValueError(
                f"params must have shape (n_params,) or ({ntraj}, {system.n_params}); "
                f"got {params.shape}"
            )
        par_rows: Any = params
    else:
        par_rows = params_rows(params, system.params, ntraj, "params")
        if par_rows.shape[0] == 1:  # one row for all (or no parameters): the same in each task
            par_rows = par_rows[0] if system.n_params else None
    opts = {
        "method": method, "rtol": rtol, "atol": atol, "h": h, "threads": threads,
        "observables": observables, **options,
    }  # fmt: skip
    keep_failed = bool(opts.pop("keep_failed", False))

    wanted = ("observables",) if observables and system.observables else ()
    key = system_hash(system)  # compiles here: the pickle carries the kernels' source
    payload = pickle.dumps(system)
    obs_names = list(system.observables) if wanted else []
    if store is None:  # before any task runs
        check_memory(
            float(ntraj) * t.size * (n + len(obs_names)) * 8.0,
            f"gathering {ntraj} trajectories x {t.size} output times x {n} states",
            "pass store= to stream the result to a Zarr store instead",
        )
    starts = list(range(0, ntraj, chunk))
    group = None
    todo = list(range(len(starts)))
    if store is not None:  # the settings (hashes of the inputs: a second of CPU at 1 GB) go there
        settings = {
            **{k: opts.get(k) for k in ("method", "rtol", "atol", "h", "observables")},
            **{k: options.get(k) for k in _RESULT_OPTIONS},
            "n_traj": ntraj, "n_state": n, "chunk": chunk,
            "x0": _keys.array_token(x0), "params": _keys.array_token(params),
        }  # fmt: skip
        group, todo = _open_for_run(store, resume, system, key, settings, t, obs_names, chunk)
        store = _store_spec(store)

    def rows(a: Any, i: int) -> Any:
        return a[starts[i] : starts[i] + chunk]

    def par_of(i: int) -> Any:
        return par_rows if par_rows is None or par_rows.ndim == 1 else rows(par_rows, i)

    token = uuid.uuid4().hex[:12]
    with warnings.catch_warnings():
        # numpy inputs go into the graph on purpose: a task that must run again (its worker
        # died) still has them, which scattered data would not
        warnings.filterwarnings("ignore", "Sending large graph", UserWarning)
        futures = _submit(client, todo, starts, chunk, x0, par_rows, par_of, key, payload, t,
                          opts, store, token)  # fmt: skip
    index = {f.key: i for f, i in zip(futures, todo, strict=True)}
    total, done = len(starts), len(starts) - len(todo)
    if progress is not None:
        progress(done, total)
    from distributed import as_completed

    # results come straight from the workers (not relayed and re-serialised by the
    # scheduler) unless the client was made with direct_to_workers=False
    direct = client.direct_to_workers is not False and _DIRECT

    def arrived() -> Iterator[tuple[int, IntegrationResult]]:
        """Each chunk's result at its first row, as it comes (then released)."""
        nonlocal done
        for batch in as_completed(futures).batches():
            outs = client.gather(batch, direct=direct)
            for fut, out in zip(batch, outs, strict=True):
                if out is not None:
                    yield starts[index[fut.key]], _part(t, method, obs_names, out)
                fut.release()
                done += 1
                if progress is not None:
                    progress(done, total)

    try:
        if group is None:
            res = IntegrationResult.assemble(arrived(), ntraj)
        else:
            for _ in arrived():  # the chunks are in the store
                pass
    finally:
        client.cancel(futures)
    if group is not None:
        group.attrs["nhfast"] = {**group.attrs["nhfast"], "complete": True}
        res = _result_from_group(group, method)
    report_failures(res, res.status != 0, keep_failed)
    return res


def _submit(client, todo, starts, chunk, x0, par_rows, par_of, key, payload, t, opts, store, token):
    """One future per chunk in ``todo`` (Dask inputs stay on the cluster)."""
    if not todo:
        return []
    if not is_dask_array(x0) and not is_dask_array(par_rows):
        k = len(todo)
        return client.map(
            _run_chunk, [key] * k, [payload] * k,
            [x0[starts[i] : starts[i] + chunk] for i in todo], [par_of(i) for i in todo],
            [t] * k, [opts] * k, [store] * k, todo, [starts[i] for i in todo],
            key=[f"nhfast-chunk-{token}-{i}" for i in todo], retries=0,
        )  # fmt: skip
    import dask

    def blocks(a: Any) -> list[Any]:
        if a is None or not is_dask_array(a) and a.ndim == 1:
            return [a] * len(starts)
        if not is_dask_array(a):
            return [a[s : s + chunk] for s in starts]
        return list(a.rechunk({0: chunk, 1: -1}).to_delayed().ravel())

    xb, pb = blocks(x0), blocks(par_rows)
    task = dask.delayed(_run_chunk, pure=True)
    graphs = [
        task(key, payload, xb[i], pb[i], t, opts, store, i, starts[i],
             dask_key_name=f"nhfast-chunk-{token}-{i}")
        for i in todo
    ]  # fmt: skip
    return client.compute(graphs)


def _store_spec(store: Any) -> Any:
    return os.fspath(store) if isinstance(store, str | os.PathLike) else store


def _open_for_run(store, resume, system, key, settings, t, obs_names, chunk):
    """Create the Zarr group of a run, or reopen it to resume: (group, chunks to run)."""
    import zarr

    store = _store_spec(store)
    existing = _claim(store)
    n_chunks = -(-settings["n_traj"] // chunk)
    head = {
        "format": FORMAT,
        "version": __version__,
        "system": system.name,
        "system_hash": key,
        "settings": settings,
        "complete": False,
    }
    if resume and existing:
        group = zarr.open_group(store, mode="r+")
        if "nhfast" in group.attrs:
            old = dict(group.attrs["nhfast"])
            diff = [k for k in ("format", "system_hash") if old.get(k) != head[k]]
            was, now = old.get("settings") or {}, _jsonable(head["settings"])
            diff += [k for k in now if was.get(k) != now[k]]
            same_t = "t" in group and np.array_equal(group["t"][:], t)
            if diff or not same_t:
                what = ", ".join(diff + ([] if same_t else ["t"]))
                raise ValueError(
                    f"store {store!r} holds another run (different {what}): pass resume=False "
                    "to overwrite it, or another store"
                )
            done = np.asarray(group["done"][:])
            damaged = [i for i in np.flatnonzero(done) if _damaged(group, int(i), chunk)]
            if damaged:
                first = damaged[0]
                last = min((first + 1) * chunk, settings["n_traj"]) - 1
                warnings.warn(
                    f"store {store!r}: {len(damaged)} chunk(s) written before do not match "
                    f"their checksums (first: chunk {first}, trajectories {first * chunk}.."
                    f"{last}); they are computed again",
                    IntegrationWarning,
                    stacklevel=3,
                )
                for i in damaged:
                    group["done"][i] = 0
                done[damaged] = 0
            return group, [int(i) for i in np.flatnonzero(done == 0)]
    try:
        group = zarr.open_group(store, mode="w")
    except OSError as exc:
        raise PermissionError(
            f"store={store!r}: cannot write there ({exc.strerror or exc}): expected a "
            "writable directory"
        ) from exc
    ntraj, n = settings["n_traj"], settings["n_state"]
    group.create_array("t", data=t)
    group.create_array("y", shape=(ntraj, t.size, n), chunks=(chunk, t.size, n), dtype="f8")
    if obs_names:
        arr = group.create_array(
            "observables",
            shape=(ntraj, t.size, len(obs_names)),
            chunks=(chunk, t.size, len(obs_names)),
            dtype="f8",
        )
        arr.attrs["names"] = obs_names
    group.create_array("status", shape=(ntraj,), chunks=(chunk,), dtype="i4", fill_value=0)
    if _HAS_T_REACHED:
        group.create_array("t_reached", shape=(ntraj,), chunks=(chunk,), dtype="f8")
    st = group.create_array(
        "stats", shape=(ntraj, len(STATS)), chunks=(chunk, len(STATS)), dtype="i8", fill_value=0
    )
    st.attrs["names"] = list(STATS)
    checked = [k for k in ("y", "observables", "status", "t_reached", "stats") if k in group]
    ck = group.create_array(
        "checksums", shape=(n_chunks, len(checked)), chunks=(1, len(checked)), dtype="i8",
        fill_value=0,
    )  # fmt: skip
    ck.attrs["arrays"] = checked
    group.create_array("done", shape=(n_chunks,), chunks=(1,), dtype="u1", fill_value=0)
    group.attrs["nhfast"] = head
    return group, list(range(n_chunks))


def _claim(store: Any) -> bool:
    """Whether ``store`` holds an nhfast store (True) or is new or empty (False); refuses
    anything else (a file, someone else's directory, an unwritable place) before a byte is
    written."""
    if not isinstance(store, str):
        import zarr

        try:
            group = zarr.open_group(store, mode="r")
        except Exception:  # noqa: BLE001 - nothing there yet
            return False
        if "nhfast" not in group.attrs and (list(group.keys()) or dict(group.attrs)):
            raise ValueError(
                f"store={store!r} holds a Zarr group that is not an nhfast ensemble store: "
                "nhfast writes only into a new, empty or nhfast-made store"
            )
        return "nhfast" in group.attrs
    path = os.path.abspath(store)
    if os.path.isfile(path):
        raise ValueError(
            f"store={store!r} is a file: expected a directory (new, empty, or a store an "
            "earlier integrate_ensemble wrote)"
        )
    if not os.path.isdir(path):
        parent = os.path.dirname(path) or "."
        while not os.path.exists(parent):
            parent = os.path.dirname(parent)
        if not os.access(parent, os.W_OK | os.X_OK):
            raise PermissionError(
                f"store={store!r}: cannot create it, {parent!r} is not writable: expected a "
                "path in a writable directory"
            )
        return False
    entries = sorted(os.listdir(path))
    if not entries:
        if not os.access(path, os.W_OK | os.X_OK):
            raise PermissionError(f"store={store!r} is not writable: expected a writable directory")
        return False
    foreign = [e for e in entries if e not in _MEMBERS]
    head = _store_head(path)
    if head is None or foreign:
        shown = ", ".join(repr(e) for e in (foreign or entries)[:3])
        raise ValueError(
            f"store={store!r} is a directory that is not an nhfast ensemble store (it holds "
            f"{shown}{', ...' if len(foreign or entries) > 3 else ''}): nhfast writes only into "
            "a new, empty or nhfast-made directory, and never clears another; pass another "
            "path"
        )
    if not os.access(path, os.W_OK | os.X_OK):
        raise PermissionError(f"store={store!r} is not writable: expected a writable directory")
    return True


def _store_head(path: str) -> dict | None:
    """The ``nhfast`` attributes of the Zarr group at ``path``, or None."""
    import json

    try:
        with open(os.path.join(path, "zarr.json"), encoding="utf-8") as fh:
            meta = json.load(fh)
    except (OSError, ValueError):
        return None
    head = (meta.get("attributes") or {}).get("nhfast")
    return head if isinstance(head, dict) and "format" in head else None


def _damaged(group: Any, index: int, chunk: int) -> list[str]:
    """The arrays whose values of chunk ``index`` do not match the checksums (unreadable ones
    included)."""
    ck = group["checksums"]
    names = list(ck.attrs["arrays"])
    n_traj = group["status"].shape[0]
    sl = slice(index * chunk, min((index + 1) * chunk, n_traj))
    try:
        want = [int(v) for v in ck[index]]
    except Exception:  # noqa: BLE001 - the checksums' own chunk is damaged
        return ["checksums"]
    bad = []
    for name, w in zip(names, want, strict=True):
        try:
            got = _keys.array_checksum(group[name][sl])
        except Exception:  # noqa: BLE001 - truncated or emptied chunk: a decompression error
            got = None
        if got != w:
            bad.append(name)
    return bad


def _part(t: np.ndarray, method: str, obs_names: list[str], out: tuple) -> IntegrationResult:
    """The result of one chunk from what its task returned (views, no copies)."""
    y, obs, status, stats, reached = out
    return IntegrationResult(
        t=t,
        y=y,
        status=status,
        stats={k: stats[:, j] for j, k in enumerate(STATS)},
        method=method,
        observables={k: obs[:, :, j] for j, k in enumerate(obs_names)} if obs_names else {},
        t_reached=reached if _HAS_T_REACHED else None,
    )


def _jsonable(value: Any) -> Any:
    """``value`` as it reads back from JSON attributes (tuples as lists)."""
    import json

    return json.loads(json.dumps(value))


def _result_from_group(group: Any, method: str) -> IntegrationResult:
    import dask.array as da

    obs: dict[str, Any] = {}
    if "observables" in group:
        arr = group["observables"]
        whole = da.from_zarr(arr)
        obs = {k: whole[:, :, j] for j, k in enumerate(arr.attrs["names"])}
    stats = da.from_zarr(group["stats"])
    res = IntegrationResult(
        t=np.asarray(group["t"][:]),
        y=da.from_zarr(group["y"]),
        status=np.asarray(group["status"][:]),
        stats={k: stats[:, j] for j, k in enumerate(group["stats"].attrs["names"])},
        method=method,
        observables=obs,
    )
    if "t_reached" in group:
        res.t_reached = np.asarray(group["t_reached"][:])
    return res


def open_store(store: Any, verify: bool = True) -> IntegrationResult:
    """The result of a run written by :func:`integrate_ensemble` (``y``, observables and
    stats as Dask arrays over the store).

    Parameters
    ----------
    store : str, os.PathLike or zarr store
    verify : bool
        Read every chunk once and check it against its checksums (False: trust the store).

    Raises
    ------
    ValueError
        If the store was not written by nhfast or the run is not complete.
    nhfast.errors.DamagedStoreError
        If a chunk does not match its checksums (naming it).
    """
    import zarr

    try:
        group = zarr.open_group(_store_spec(store), mode="r")
    except (FileNotFoundError, zarr.errors.GroupNotFoundError):
        raise ValueError(f"store={store!r}: no ensemble store there") from None
    head = dict(group.attrs.get("nhfast", {}))
    if head.get("format") != FORMAT:
        was = f" (format {head['format']}, without checksums)" if "format" in head else ""
        raise ValueError(f"{store!r} is not an nhfast ensemble store of format {FORMAT}{was}")
    if not head.get("complete"):
        raise ValueError(f"{store!r} holds an unfinished run: call integrate_ensemble to resume")
    if verify:
        chunk = int(head["settings"]["chunk"])
        n_traj = int(head["settings"]["n_traj"])
        for i in range(group["done"].shape[0]):
            bad = _damaged(group, i, chunk)
            if bad:
                raise DamagedStoreError(
                    f"store {store!r}: chunk {i} (trajectories {i * chunk}.."
                    f"{min((i + 1) * chunk, n_traj) - 1}) of {', '.join(bad)} does not match "
                    "its checksum (deleted, truncated or overwritten): resume the run with "
                    "integrate_ensemble(..., store=..., resume=True) to compute it again"
                )
    return _result_from_group(group, head["settings"]["method"])
