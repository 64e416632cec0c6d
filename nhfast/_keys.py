"""Every content key and checksum nhfast computes, and what each one covers.

A key names a cached artefact by its content; a checksum guards stored bytes. All of them are
computed here, from inputs their callers gather (the caller knows what its artefact depends
on; this module decides how that becomes a key, so two keys can never collide by accident:
each is hashed under its own domain string).

====================  ===============================================  ======================
key                   covers                                           gathered by
====================  ===============================================  ======================
expression_digest     a generator's SymPy input, node by node          ``codegen`` banners
code_fingerprint      source files of a code path, version strings     ``_kernels``,
                                                                       ``vectorfield``
source_key            generated C: generator, kind, input, name        ``_kernels``
recipe_key            generated C of a field, before its derivatives   ``vectorfield``
taylor_key            a Taylor kernel: input, name, unrolled order     ``_kernels``
library_key           a compiled library: source, headers, toolchain   ``_jit``
system_key            a system's trajectories (its C, else pickle)     ``distributed``
array_token           an input array (bytes, shape; Dask graph name)   ``distributed``
array_checksum        stored values of an array (63 bits)              ``distributed``
bytes_checksum        stored bytes (a library, a source)               ``_jit``
short_digest          a few hex digits naming a host or a CPU          ``_jit``
====================  ===============================================  ======================
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import sympy as sp

from nhfast._validate import is_dask_array

__all__: list[str] = []


def _hash(domain: str, parts: Iterable[object]) -> str:
    """SHA-256 of ``domain`` and ``parts``, each followed by a NUL (bytes as they are)."""
    h = hashlib.sha256()
    for part in (domain, *parts):
        h.update(part if isinstance(part, bytes) else str(part).encode())
        h.update(b"\0")
    return h.hexdigest()


def expression_digest(items: Sequence[object]) -> str:
    """SHA-256 of the SymPy input of a generator.

    Expression trees are hashed node by node (``srepr`` of the atoms, the class name of the
    other nodes), each shared subtree once; a Dummy counts by order of appearance, since its
    index differs between processes.

    Parameters
    ----------
    items : sequence
        SymPy objects and plain Python values (names, sizes; hashed by ``repr``).

    Returns
    -------
    str
        A hex digest.
    """
    memo: dict[int, str] = {}
    dummies: dict[sp.Dummy, int] = {}

    def digest(e: sp.Basic) -> str:
        d = memo.get(id(e))
        if d is None:
            if e.args:
                text = f"{type(e).__name__}({','.join(digest(a) for a in e.args)})"
            elif isinstance(e, sp.Dummy):
                k = dummies.setdefault(e, len(dummies))
                text = f"Dummy#{k}({e.name!r}, {sorted(e.assumptions0.items())})"
            else:
                text = sp.srepr(e)
            d = memo[id(e)] = hashlib.sha256(text.encode()).hexdigest()
        return d

    h = hashlib.sha256()
    for item in items:
        h.update((digest(item) if isinstance(item, sp.Basic) else repr(item)).encode())
        h.update(b"\0")
    return h.hexdigest()


def code_fingerprint(
    files: Iterable[Path], versions: Iterable[str] = (), strict: bool = False
) -> str | None:
    """Hash of the code that produces an artefact: the files' names and bytes, and versions.

    An edited checkout with an unchanged version number must not be served artefacts made by
    the old code.

    Parameters
    ----------
    files : iterable of Path
    versions : iterable of str
        Versions of the code and of the libraries its output depends on.
    strict : bool
        Return None when a file cannot be read (then nothing may be keyed on it); otherwise
        such a file counts as the word ``unreadable`` (the versions still tell code apart).

    Returns
    -------
    str or None
        A hex digest.
    """
    parts: list[object] = []
    for path in files:
        try:
            parts += [path.name, path.read_bytes()]
        except OSError:
            if strict:
                return None
            parts += [path.name, "unreadable"]
    return _hash("nhfast-code", [*parts, *versions])


def source_key(fingerprint: str, kind: str, input_digest: str, name: str) -> str:
    """Key of a generated C source: the generator's fingerprint, its kind and input, the name.

    Parameters
    ----------
    fingerprint : str
        :func:`code_fingerprint` of the generator.
    kind : str
        Which generator (and its options) writes the source.
    input_digest : str
        :func:`expression_digest` of its input.
    name : str
        The system's name (in the source's banner).

    Returns
    -------
    str
    """
    return _hash("nhfast-source", [fingerprint, kind, repr(str(name)), input_digest])


def recipe_key(fingerprint: str, parts: Iterable[str], name: str) -> str:
    """Key of the generated C of a system by its recipe, before its kernels are derived.

    Parameters
    ----------
    fingerprint : str
        :func:`code_fingerprint` of the generator.
    parts : iterable of str
        Digests that determine the kernels' expressions (the field's description, the code
        that derives them, the companions requested).
    name : str
        The system's name.

    Returns
    -------
    str
    """
    return _hash("nhfast-recipe", [fingerprint, repr(str(name)), *parts])


def taylor_key(fingerprint: str, input_digest: str, name: str, order: int | None) -> str:
    """Key of a Taylor kernel's source: its input, the name and the order it is unrolled for.

    Parameters
    ----------
    fingerprint : str
        :func:`code_fingerprint` of the generator.
    input_digest : str
        Digest of the right-hand side and its solves.
    name : str
        The system's name.
    order : int or None
        The order of the unrolled pass (None: the general pass only).

    Returns
    -------
    str
    """
    return _hash("nhfast-taylor", [fingerprint, repr(str(name)), input_digest, f"order={order}"])


def library_key(source: str, headers: dict[str, bytes], toolchain: Iterable[str]) -> str:
    """Key of a compiled library: its source, the headers' bytes and the toolchain.

    Parameters
    ----------
    source : str
        The C source.
    headers : dict of str to bytes
        The headers it may include (name -> bytes); their location does not count.
    toolchain : iterable of str
        ABI version, compiler version, command and flags, platform, CPU (for native code).

    Returns
    -------
    str
    """
    parts: list[object] = []
    for name, text in headers.items():
        parts += [name, hashlib.sha256(text).digest()]
    return _hash("nhfast-library", [*parts, source, *toolchain])


def system_key(description: bytes) -> str:
    """Key of what determines a system's trajectories: the C of its kernels, else its pickle."""
    return hashlib.sha256(description).hexdigest()


def bytes_checksum(data: bytes) -> str:
    """SHA-256 of stored bytes (a library, a source), checked when they are read back."""
    return hashlib.sha256(data).hexdigest()


def short_digest(text: str, digits: int = 16) -> str:
    """The first ``digits`` hex digits of the SHA-256 of ``text`` (names, not security)."""
    return hashlib.sha256(text.encode()).hexdigest()[:digits]


def array_checksum(a: Any) -> int:
    """A 63-bit checksum of an array's values (it fits an int64 in a store)."""
    data = np.ascontiguousarray(np.asarray(a))
    h = hashlib.blake2b(data.tobytes(), digest_size=8).digest()
    return int.from_bytes(h, "little") >> 1


def array_token(a: Any) -> str | None:
    """A short identity of an input array: its bytes' hash and shape, a Dask array's graph name.

    Parameters
    ----------
    a : array_like, Dask array or None

    Returns
    -------
    str or None
        None for None.
    """
    if a is None:
        return None
    if is_dask_array(a):
        return f"dask:{a.name}"
    data = np.ascontiguousarray(a)
    return f"sha256:{hashlib.sha256(data.tobytes()).hexdigest()}:{data.shape}"
