"""Compile generated C into a small shared library, cache it by content hash, load it.

The cache has two levels, both in :func:`cache_dir`:

* libraries: ``<cache>/k<hash>/`` (``kernel.c``, ``kernel.<ext>``, ``meta.json`` with the
  SHA-256 of the library), keyed by the C source, headers, compiler and flags (:func:`build`);
* generated sources: ``<cache>/s<hash>/`` (``kernel.c``, ``meta.json`` with its SHA-256),
  keyed by the caller on the symbolic input before code generation
  (:func:`cached_source`, :func:`store_source`), so a warm process skips CSE and printing.

An entry is built in a private temporary directory ``.tmp-<key>-<host>-<pid>-<tag>`` and
published with one ``os.rename``; a published entry is never overwritten. When two processes
build the same key at once, the loser's rename fails and it uses the winner's entry. An entry
whose checksum does not match is moved aside, removed and rebuilt. Build directories of
processes that are gone (on this host) are removed by the next build and by
:func:`clear_cache`. When the cache cannot be written (a file, read-only, disk full), the
process warns once and caches in a private temporary directory instead.
"""

from __future__ import annotations

import atexit
import ctypes
import errno
import json
import os
import platform
import re
import shlex
import shutil
import socket
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
import uuid
import warnings
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from nhfast import _keys, _progress
from nhfast._abi import ABI_VERSION, INCLUDE_DIR, INFO, INFO_LEN
from nhfast.errors import BackendWarning, CacheWarning, CompilationError

_LIB_EXT = ".dll" if sys.platform == "win32" else ".dylib" if sys.platform == "darwin" else ".so"
_lock = threading.Lock()
_loaded: dict[str, LoadedLibrary] = {}
_building: dict[str, threading.Lock] = {}  # key -> the lock of its build in this process
_warned_no_compiler = False
_warned_roots: set[Path] = set()  # unusable cache directories already warned about
_fallback_root: Path | None = None  # this process's private cache, made when first needed


def cache_dir() -> Path:
    """Directory of the kernel cache: ``$NHFAST_CACHE_DIR`` or the user cache directory."""
    env = os.environ.get("NHFAST_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("nhfast", appauthor=False)) / "kernels"


def compiler_command() -> list[str] | None:
    """The C compiler: ``$CC``, else the one Python was built with, else ``cc``; None if absent."""
    cc = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    try:
        cmd = shlex.split(cc)
    except ValueError as exc:
        raise ValueError(
            f"CC={cc!r} cannot be split into a command ({exc}): fix its quoting"
        ) from None
    if not cmd or shutil.which(cmd[0]) is None:
        if not os.environ.get("CC") and shutil.which("cc"):
            return ["cc"]
        return None
    return cmd


@lru_cache(maxsize=8)
def _compiler_version(cc: tuple[str, ...]) -> str:
    try:
        out = subprocess.run([*cc, "--version"], capture_output=True, text=True, timeout=60)
        return out.stdout.strip().splitlines()[0] if out.stdout.strip() else out.stderr.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


@lru_cache(maxsize=1)
def _cpu_id() -> str:
    """What -march=native depends on: the CPU model and feature flags."""
    text = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.startswith(("model name", "flags", "Features", "CPU part")):
                    text += line
                if line.strip() == "":
                    break
    except OSError:
        text = platform.processor()
    return _keys.short_digest(text)


def compile_flags() -> list[str]:
    """Flags for kernel libraries (``$NHFAST_CFLAGS`` replaces the optimisation flags)."""
    env = os.environ.get("NHFAST_CFLAGS")
    if env is not None:
        try:
            opt = shlex.split(env)
        except ValueError as exc:
            raise ValueError(
                f"NHFAST_CFLAGS={env!r} cannot be split into compiler flags ({exc}): "
                "fix its shell quoting"
            ) from None
    else:
        opt = ["-O3", "-fno-math-errno"]
        machine = platform.machine().lower()
        if sys.platform.startswith("linux") and machine in ("x86_64", "amd64"):
            opt.append("-march=native")
        elif sys.platform.startswith("linux") and machine in ("aarch64", "arm64"):
            opt.append("-mcpu=native")
    return ["-std=c99", "-shared", "-fPIC", *opt]


def backend() -> str:
    """``"c"`` when kernels can be compiled, ``"numpy"`` otherwise (or if forced).

    ``$NHFAST_BACKEND`` may force ``numpy``; without a compiler nhfast warns once and uses
    NumPy, which is slow but gives the same results.
    """
    global _warned_no_compiler
    forced = os.environ.get("NHFAST_BACKEND", "").strip().lower()
    if forced == "numpy":
        return "numpy"
    if forced not in ("", "c"):
        raise ValueError(f"NHFAST_BACKEND must be 'c' or 'numpy', got {forced!r}")
    if compiler_command() is None:
        if not _warned_no_compiler:
            warnings.warn(
                "no C compiler found (set CC): nhfast uses the NumPy backend, which is slow",
                BackendWarning,
                stacklevel=3,
            )
            _warned_no_compiler = True
        return "numpy"
    return "c"


@dataclass
class LoadedLibrary:
    """A loaded kernel library: its ctypes handle, path, cache key and info array."""

    key: str
    path: Path
    lib: ctypes.CDLL
    info: tuple[int, ...]

    def has(self, symbol: str) -> bool:
        """Whether the library exports ``symbol``."""
        return hasattr(self.lib, symbol)

    def address(self, symbol: str) -> int:
        """Address of an exported kernel function."""
        return ctypes.cast(getattr(self.lib, symbol), ctypes.c_void_p).value or 0


def headers() -> dict[str, bytes]:
    """The shipped headers generated kernels may include (file name -> bytes)."""
    return {p.name: p.read_bytes() for p in sorted(INCLUDE_DIR.glob("*.h"))}


def cache_key(source: str) -> tuple[str, list[str]]:
    """Content hash of everything that determines the library, and the compile command.

    The key covers the source, the bytes of the shipped headers (``nh_abi.h``, ``linalg.h``),
    the compiler and its flags, and the CPU for ``-march=native``; not the headers' location.
    """
    cc = compiler_command()
    if cc is None:
        raise CompilationError(["cc"], "no C compiler found (set CC)")
    flags = compile_flags()
    toolchain = (
        f"abi={ABI_VERSION}",
        _compiler_version(tuple(cc)),
        " ".join(cc + flags),
        sys.platform,
        platform.machine(),
        _cpu_id() if any(f.endswith("=native") for f in flags) else "",
    )
    return _keys.library_key(source, headers(), toolchain), [*cc, *flags, f"-I{INCLUDE_DIR}"]


def _sha256(path: Path) -> str:
    return _keys.bytes_checksum(path.read_bytes())


def _valid(entry: Path) -> bool:
    """True if the entry's library exists and matches the checksum in its metadata."""
    try:
        meta = json.loads((entry / "meta.json").read_text())
        return (
            meta.get("abi") == ABI_VERSION
            and _sha256(entry / f"kernel{_LIB_EXT}") == meta["sha256"]
        )
    except (OSError, ValueError, KeyError, TypeError):
        return False


def _quarantine(entry: Path) -> None:
    """Move a corrupted entry aside (never rewrite it in place), then remove it.

    The rename is atomic, so no other process sees a half-removed entry; a library another
    process has loaded stays mapped after the removal (where the removal fails, as for a
    loaded library on Windows, :func:`clear_cache` removes the quarantined entry later).
    """
    aside = entry.with_name(f"{entry.name}.corrupt-{uuid.uuid4().hex[:8]}")
    try:
        os.rename(entry, aside)
    except OSError:
        return  # another process moved it first, or the cache is read-only
    _remove(aside)  # a directory, or a file where an entry should be


#: strerror texts of a full disk or quota, as the compiler reports them.
_NO_SPACE = tuple(os.strerror(e) for e in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)))


def _compile_into(tmp: Path, source: str, command: list[str], label: str) -> None:
    src = tmp / "kernel.c"
    lib = tmp / f"kernel{_LIB_EXT}"
    src.write_text(source)
    cmd = [*command, str(src), "-o", str(lib), "-lm"]
    try:
        with _progress.stage(label):
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    except OSError as exc:
        raise CompilationError(cmd, str(exc)) from exc
    if proc.returncode != 0 or not lib.exists():
        full = next((m for m in _NO_SPACE if m in proc.stderr), None)
        if full is not None:  # the cache's disk, not the source: let build() fall back
            raise OSError(errno.ENOSPC, full, str(lib))
        raise CompilationError(cmd, proc.stderr, proc.returncode)
    meta = {
        "abi": ABI_VERSION,
        "sha256": _sha256(lib),
        "command": cmd,
        "compiler": _compiler_version(tuple(command[:1])),
    }
    (tmp / "meta.json").write_text(json.dumps(meta, indent=1))


def _load(key: str, entry: Path) -> LoadedLibrary:
    lib = ctypes.CDLL(str(entry / f"kernel{_LIB_EXT}"))
    fn = lib.nh_info
    fn.restype = ctypes.POINTER(ctypes.c_int64)
    ptr = fn()
    info = tuple(int(ptr[i]) for i in range(INFO_LEN))
    if info[INFO["abi"]] != ABI_VERSION:
        raise CompilationError([str(entry)], f"kernel ABI {info[INFO['abi']]} != {ABI_VERSION}")
    return LoadedLibrary(key=key, path=entry, lib=lib, info=info)


def _probe(root: Path) -> None:
    """Create ``root`` if needed; raise OSError unless kernels can be built in it."""
    root.mkdir(parents=True, exist_ok=True)  # FileExistsError when root is a file
    if not os.access(root, os.W_OK | os.X_OK):
        raise PermissionError(errno.EACCES, "not writable", str(root))


def _private_root() -> Path:
    """This process's private temporary cache (made on first use, removed at exit)."""
    global _fallback_root
    if _fallback_root is None or not _fallback_root.is_dir():
        _fallback_root = Path(tempfile.mkdtemp(prefix="nhfast-kernels-"))
        atexit.register(shutil.rmtree, _fallback_root, ignore_errors=True)
    return _fallback_root


def _warn_unusable(root: Path, exc: OSError) -> Path:
    """Warn (once per directory) that ``root`` cannot be used; return the private cache."""
    private = _private_root()
    if root not in _warned_roots:
        _warned_roots.add(root)
        reason = f"{type(exc).__name__}: {exc.strerror or exc}"
        warnings.warn(
            f"the kernel cache {root} (NHFAST_CACHE_DIR, else the user cache directory) is not "
            f"usable ({reason}); this process caches kernels in {private} instead. "
            "Set NHFAST_CACHE_DIR to a writable directory.",
            CacheWarning,
            stacklevel=5,
        )
    return private


def build_root() -> Path:
    """Where this process builds kernels: :func:`cache_dir`, or a private temporary cache.

    When the configured directory cannot be created or written (``NHFAST_CACHE_DIR`` names a
    file, a read-only directory, ...), nhfast warns once per directory and builds in one
    temporary directory per process (``tempfile.mkdtemp``), so the run still works. The same
    happens when a write fails later (a full disk).
    """
    root = cache_dir()
    if root in _warned_roots and _fallback_root is not None:
        return _private_root()
    try:
        _probe(root)
        return root
    except OSError as exc:
        return _warn_unusable(root, exc)


# ---------------------------------------------------------------------------------------------
# Build directories: named after their key, host and process, so abandoned ones can be told
# ---------------------------------------------------------------------------------------------


@lru_cache(maxsize=1)
def _host() -> str:
    return _keys.short_digest(socket.gethostname(), 8)


_BUILD_NAME = re.compile(r"\.tmp-[a-z]?[0-9a-f]+-([0-9a-f]{8})-(\d+)-[0-9a-f]{8}")


def _build_dir(root: Path, key: str) -> Path:
    """A new private build directory for ``key`` in ``root``."""
    tmp = root / f".tmp-{key[:13]}-{_host()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    return tmp


def _owner_gone(path: Path) -> bool:
    """True if ``path`` is the build directory of a process of this host that has ended."""
    m = _BUILD_NAME.fullmatch(path.name)
    if m is None or m.group(1) != _host() or sys.platform == "win32":
        return False  # (on Windows os.kill(pid, 0) would end the process: age rule only)
    pid = int(m.group(2))
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except (PermissionError, OSError):
        return False  # alive (another user's), or cannot tell
    return False


def _sweep(root: Path) -> None:
    """Remove the build directories of ended processes of this host (killed builds)."""
    for b in _scan(root)[1]:
        if _owner_gone(b):
            shutil.rmtree(b, ignore_errors=True)


def _publish(root: Path, name: str, fill) -> Path:
    """Make ``root/name`` with ``fill(tmp)`` in a build directory and one atomic rename.

    Returns the entry (the one another process published first, if it won the race).
    """
    entry = root / name
    tmp = _build_dir(root, name)
    try:
        fill(tmp)
        try:
            os.rename(tmp, entry)  # atomic publish; fails if the entry exists
        except OSError:
            if not entry.exists():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return entry


# ---------------------------------------------------------------------------------------------
# Level 2: libraries, keyed by the C source
# ---------------------------------------------------------------------------------------------


def _build_entry(root: Path, key: str, source: str, command: list[str], label: str):
    """(entry, hit) of the library of ``key`` in ``root``, compiling it if needed."""
    name = f"k{key[:40]}"
    entry = root / name
    for _ in range(3):
        if entry.exists():
            if _valid(entry):
                return entry, True
            _quarantine(entry)
            continue
        _sweep(root)
        entry = _publish(root, name, lambda tmp: _compile_into(tmp, source, command, label))
        if _valid(entry):
            return entry, False
    raise CompilationError(command, f"cache entry {entry} stays corrupted")


def build(source: str, label: str | None = None) -> tuple[LoadedLibrary, bool]:
    """Compile (or find in the cache) and load the library for ``source``.

    Parameters
    ----------
    source : str
        The C source.
    label : str, optional
        What is compiled, for the progress line of a compilation slower than
        ``nhfast._progress.THRESHOLD`` seconds.

    Returns
    -------
    (LoadedLibrary, bool)
        The library and whether it came from the cache (memory or disk).
    """
    key, command = cache_key(source)
    label = label or f"compiling kernels ({len(source) // 1000} kB of C)"
    with _lock:
        if key in _loaded:
            return _loaded[key], True
        key_lock = _building.setdefault(key, threading.Lock())
    # one build per key at a time; other keys (a background build) go on meanwhile
    with key_lock:
        with _lock:
            if key in _loaded:
                return _loaded[key], True
            configured = cache_dir()
            root = build_root()
        if root != configured and _valid(configured / f"k{key[:40]}"):
            entry, hit = configured / f"k{key[:40]}", True  # a read-only cache still serves
        else:
            entry, hit = _build_or_fall_back(root, key, source, command, label)
        try:
            loaded = _load(key, entry)
        except OSError:  # matches its checksum, yet no loadable library: build it again
            _quarantine(entry)
            with _lock:
                root = build_root()
            entry, hit = _build_or_fall_back(root, key, source, command, label)
            loaded = _load(key, entry)
        with _lock:
            _loaded[key] = loaded
            _building.pop(key, None)
        return loaded, hit


def loaded_library(source: str) -> LoadedLibrary | None:
    """The library of ``source`` if this process has it or the cache holds it compiled (loaded
    now), else None; never compiles."""
    key, _ = cache_key(source)
    with _lock:
        if key in _loaded:
            return _loaded[key]
    entry = cache_dir() / f"k{key[:40]}"
    if not _valid(entry):
        return None
    try:
        return build(source)[0]
    except (OSError, CompilationError):
        return None


def _build_or_fall_back(root: Path, key: str, source: str, command: list[str], label: str):
    try:
        return _build_entry(root, key, source, command, label)
    except OSError as exc:  # a full disk, a directory gone read-only meanwhile
        if root == _fallback_root:
            raise CompilationError(command, f"cannot write the kernel cache {root}: {exc}") from exc
        private = _warn_unusable(root, exc)
        try:
            return _build_entry(private, key, source, command, label)
        except OSError as exc2:
            raise CompilationError(
                command, f"cannot write the kernel cache {root} ({exc}) nor {private} ({exc2})"
            ) from exc2


def clear_memory_cache() -> None:
    """Forget the libraries loaded in this process (they stay mapped); for tests."""
    with _lock:
        _loaded.clear()


# ---------------------------------------------------------------------------------------------
# Level 1: generated sources, keyed by the caller on the symbolic input
# ---------------------------------------------------------------------------------------------

#: Version of the layout of a source entry.
SOURCE_FORMAT = 1


def _source_name(key: str) -> str:
    if not re.fullmatch(r"[0-9a-f]{40,}", key):
        raise ValueError(f"a source key is a hex digest of at least 40 digits, got {key!r}")
    return f"s{key[:40]}"


def _read_source(entry: Path, key: str) -> tuple[str, dict] | None:
    """The source and metadata of a valid entry for ``key``; None if absent or corrupted."""
    try:
        meta = json.loads((entry / "meta.json").read_text())
        data = (entry / "kernel.c").read_bytes()
        if (
            meta.get("format") != SOURCE_FORMAT
            or meta.get("key") != key
            or _keys.bytes_checksum(data) != meta.get("sha256")
        ):
            return None
        return data.decode("utf-8"), meta
    except (OSError, ValueError, TypeError, AttributeError):
        return None


def cached_source_entry(key: str) -> tuple[str, dict] | None:
    """The generated source stored under ``key`` (:func:`store_source`) and the metadata
    stored with it, or None.

    Looks in :func:`cache_dir` and in this process's private cache. An entry whose checksum
    or key does not match is moved aside and removed (the caller generates the source again).

    Parameters
    ----------
    key : str
        Hex digest of the symbolic input (at least 40 digits).
    """
    name = _source_name(key)
    with _lock:
        roots = [cache_dir(), *([_fallback_root] if _fallback_root is not None else [])]
        for root in roots:
            entry = root / name
            if not os.path.lexists(entry):
                continue
            got = _read_source(entry, key)
            if got is not None:
                return got
            _quarantine(entry)
    return None


def cached_source(key: str) -> str | None:
    """The source of :func:`cached_source_entry`, or None.

    Parameters
    ----------
    key : str
        Hex digest of the symbolic input (at least 40 digits).
    """
    got = cached_source_entry(key)
    return None if got is None else got[0]


def store_source(key: str, source: str, meta: dict | None = None) -> Path | None:
    """Publish ``source`` under ``key`` (first cache level); the entry, or None if impossible.

    Best effort: the source can always be generated again, so a cache that cannot be
    written (after the warning of :func:`build_root`) only costs time.

    Parameters
    ----------
    key : str
        Hex digest of the symbolic input the source was generated from.
    source : str
        The generated C source.
    meta : dict, optional
        JSON-serialisable facts stored next to it (system name, sizes).
    """
    name = _source_name(key)
    data = source.encode("utf-8")
    info = {
        **(meta or {}),
        "format": SOURCE_FORMAT,
        "key": key,
        "sha256": _keys.bytes_checksum(data),
        "abi": ABI_VERSION,
    }

    def fill(tmp: Path) -> None:
        (tmp / "kernel.c").write_bytes(data)
        (tmp / "meta.json").write_text(json.dumps(info, indent=1))

    with _lock:
        root = build_root()
        if _read_source(root / name, key) is not None:
            return root / name
        try:
            return _publish(root, name, fill)
        except OSError as exc:
            if root == _fallback_root:
                return None
            try:
                return _publish(_warn_unusable(root, exc), name, fill)
            except OSError:
                return None


# ---------------------------------------------------------------------------------------------
# Housekeeping: what the cache holds, and clearing it
# ---------------------------------------------------------------------------------------------

#: Age in seconds after which a ``.tmp-*`` build directory counts as abandoned: the compiler
#: call itself times out after one hour, so no live build leaves its directory that long.
STALE_BUILD_AGE = 3600.0
#: Names of cache entries: published libraries ``k<hash>``, sources ``s<hash>``, and
#: quarantined ones ``k<hash>.corrupt-<tag>``.
_ENTRY_NAME = re.compile(r"[ks][0-9a-f]+(\.corrupt-[0-9a-f]+)?")


@dataclass(frozen=True)
class CacheInfo:
    """What the kernel cache holds (:func:`cache_info`).

    Attributes
    ----------
    path : Path
        The cache directory (:func:`cache_dir`).
    entries : int
        Cache entries, published and quarantined: libraries and generated sources.
    size : int
        Bytes in the entries.
    builds : int
        ``.tmp-*`` build directories: builds under way, or left by killed ones.
    stale_builds : int
        Those older than ``STALE_BUILD_AGE`` or whose process (on this host) has ended,
        which :func:`clear_cache` removes.
    is_directory : bool
        False when ``path`` exists but is not a directory (nothing can be cached there).
    sources : int
        Of ``entries``, the generated sources (first level, ``s<hash>``).
    """

    path: Path
    entries: int
    size: int
    builds: int
    stale_builds: int
    is_directory: bool
    sources: int = 0


@dataclass(frozen=True)
class ClearedCache:
    """What :func:`clear_cache` removed, and what it could not.

    Attributes
    ----------
    path : Path
        The cache directory.
    removed : int
        Entries that are gone (libraries and generated sources).
    stale_builds_removed : int
        Abandoned build directories that are gone.
    failed : tuple of (Path, str)
        What is still there, with the reason.
    """

    path: Path
    removed: int
    stale_builds_removed: int
    failed: tuple[tuple[Path, str], ...]


def _scan(root: Path) -> tuple[list[Path], list[Path]]:
    """(entries, build directories) in ``root``; none if it is absent or not a directory."""
    try:
        children = sorted(root.iterdir())
    except OSError:
        return [], []
    entries = [p for p in children if _ENTRY_NAME.fullmatch(p.name)]
    builds = []
    for p in children:
        try:
            if p.name.startswith(".tmp-") and p.is_dir():
                builds.append(p)
        except OSError:
            pass
    return entries, builds


def _size(path: Path) -> int:
    """Bytes of a file, or of the files under a directory (what vanishes meanwhile: 0)."""
    try:
        if path.is_symlink() or not path.is_dir():
            return path.lstat().st_size
        return sum(_size(p) for p in path.iterdir())
    except OSError:
        return 0


def _is_stale(path: Path, now: float) -> bool:
    if _owner_gone(path):
        return True
    try:
        return now - path.stat().st_mtime > STALE_BUILD_AGE
    except OSError:
        return False


def _remove(path: Path) -> str | None:
    """Remove a file or a directory tree: None once it is gone, else the reason it is not."""
    try:
        if path.is_symlink() or not path.is_dir():
            path.unlink()
        else:
            shutil.rmtree(path)
    except OSError as exc:
        if os.path.lexists(path):
            return f"{type(exc).__name__}: {exc.strerror or exc}"
    return None


def cache_info() -> CacheInfo:
    """What the kernel cache holds: entries, their size, build directories.

    Returns
    -------
    CacheInfo
    """
    root = cache_dir()
    entries, builds = _scan(root)
    now = time.time()
    return CacheInfo(
        path=root,
        entries=len(entries),
        size=sum(_size(e) for e in entries),
        builds=len(builds),
        stale_builds=sum(_is_stale(b, now) for b in builds),
        is_directory=root.is_dir() or not root.exists(),
        sources=sum(e.name.startswith("s") for e in entries),
    )


def clear_cache() -> ClearedCache:
    """Remove every cache entry and the abandoned build directories.

    A build directory is abandoned when it is older than ``STALE_BUILD_AGE`` or its process
    (on this host) has ended; others may belong to a build under way in another process and
    are left alone. Libraries loaded by running processes stay usable (they remain mapped);
    later runs generate and compile again.

    Returns
    -------
    ClearedCache
        Counts only what is really gone; the rest is listed in ``failed``.
    """
    root = cache_dir()
    with _lock:  # no build of this process publishes an entry meanwhile
        entries, builds = _scan(root)
        now = time.time()
        stale = [b for b in builds if _is_stale(b, now)]
        failed: list[tuple[Path, str]] = []
        gone = {"entries": 0, "builds": 0}
        for kind, paths in (("entries", entries), ("builds", stale)):
            for p in paths:
                reason = _remove(p)
                if reason is None:
                    gone[kind] += 1
                else:
                    failed.append((p, reason))
    return ClearedCache(root, gone["entries"], gone["builds"], tuple(failed))
