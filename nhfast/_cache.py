"""One memo for objects derived from a system (compiled kernels, derived fields).

Entries live as long as the system object they belong to (a weak key), so nothing is kept
for a system the caller has dropped and nothing is keyed by a reusable ``id()``.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

__all__ = ["memo", "forget"]

T = TypeVar("T")
_MEMO: weakref.WeakKeyDictionary[Any, dict[Hashable, Any]] = weakref.WeakKeyDictionary()
_LOCK = threading.RLock()


def memo(owner: Any, key: Hashable, build: Callable[[], T]) -> T:
    """``build()`` once per ``(owner, key)``; later calls return the same object.

    ``owner`` must be weak-referenceable (every system class of nhfast is).
    """
    with _LOCK:
        table = _MEMO.get(owner)
        if table is None:
            table = _MEMO[owner] = {}
        if key in table:
            return table[key]
    value = build()
    with _LOCK:
        return table.setdefault(key, value)


def forget(owner: Any, key: Hashable | None = None) -> None:
    """Drop one entry of ``owner`` (or all of them with ``key=None``)."""
    with _LOCK:
        if key is None:
            _MEMO.pop(owner, None)
        elif owner in _MEMO:
            _MEMO[owner].pop(key, None)
