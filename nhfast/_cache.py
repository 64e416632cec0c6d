"""One memo for objects derived from a system (compiled kernels, derived fields).

Entries are keyed by the owner's identity (not its equality: two equal fields are still two
owners) and live as long as the owner does: a weak reference drops them when it goes. A
memoised value must not hold a strong reference to its owner, or the owner never goes.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

__all__: list[str] = []

T = TypeVar("T")
#: id(owner) -> (weak reference to the owner, its table)
_MEMO: dict[int, tuple[weakref.ref, dict[Hashable, Any]]] = {}
_LOCK = threading.RLock()


def _table(owner: Any) -> dict[Hashable, Any]:
    key = id(owner)
    entry = _MEMO.get(key)
    if entry is None or entry[0]() is not owner:
        # the table and lock are bound now: at interpreter exit the module's globals may be
        # cleared (None) before the last owners go
        def drop(ref: weakref.ref, key: int = key, table: dict = _MEMO, lock: Any = _LOCK) -> None:
            with lock:
                if key in table and table[key][0] is ref:
                    del table[key]

        entry = _MEMO[key] = (weakref.ref(owner, drop), {})
    return entry[1]


def memo(owner: Any, key: Hashable, build: Callable[[], T]) -> T:
    """``build()`` once per ``(owner, key)``; later calls return the same object.

    ``owner`` must be weak-referenceable (every system class of nhfast is); it need not be
    hashable.
    """
    with _LOCK:
        table = _table(owner)
        if key in table:
            return table[key]
    value = build()
    with _LOCK:
        return _table(owner).setdefault(key, value)


def peek(owner: Any, key: Hashable) -> Any:
    """The memoised value of ``(owner, key)``, or None; no lock and nothing built (a read of
    two dicts, for the paths that run on every call)."""
    entry = _MEMO.get(id(owner))
    if entry is None or entry[0]() is not owner:
        return None
    return entry[1].get(key)


def forget(owner: Any, key: Hashable | None = None) -> None:
    """Drop one entry of ``owner`` (or all of them with ``key=None``)."""
    with _LOCK:
        entry = _MEMO.get(id(owner))
        if entry is None or entry[0]() is not owner:
            return
        if key is None:
            del _MEMO[id(owner)]
        else:
            entry[1].pop(key, None)
