"""Load a user's system from ``path/to/file.py:factory`` for ``nhfast run``.

:func:`load_user_system` imports the file as a module of its own, calls ``factory(**kwargs)``
and builds the :class:`~nhfast.experiments.instance.Instance`
(:func:`nhfast.experiments.spec.to_instance`). Every way this can go wrong -- no such file, no
such factory, an import or a factory that raises, a return value of the wrong type -- raises
:class:`~nhfast.errors.SystemSpecError` with a message naming what was expected.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

from nhfast._keys import short_digest
from nhfast.errors import SystemSpecError
from nhfast.experiments.instance import Instance
from nhfast.experiments.spec import ACCEPTED, to_instance

__all__: list[str] = []

_FORM = "PATH.py:FACTORY (e.g. my_system.py:build)"


def is_target(text: str) -> bool:
    """Whether ``text`` names a user's file (``....py:NAME`` or ``....py``), not a catalogue
    entry.

    Parameters
    ----------
    text : str
        The command's EXAMPLE argument.

    Returns
    -------
    bool
    """
    return ".py" in text or "/" in text or "\\" in text


def parse_target(text: str) -> tuple[Path, str]:
    """``(path, factory)`` of ``"path/to/file.py:factory"``.

    Parameters
    ----------
    text : str
        ``"path/to/file.py:factory"``.

    Returns
    -------
    (pathlib.Path, str)

    Raises
    ------
    SystemSpecError
        Without ``:FACTORY``, or when the file name does not end in ``.py``.
    """
    path, sep, factory = text.rpartition(":")
    if not sep or not factory or not path:
        raise SystemSpecError(f"{text!r}: expected {_FORM}")
    if not factory.isidentifier():
        raise SystemSpecError(f"{text!r}: factory {factory!r} is not a Python name; {_FORM}")
    if not path.endswith(".py"):
        raise SystemSpecError(f"{text!r}: expected a Python file; {_FORM}")
    return Path(path), factory


def _import(path: Path) -> ModuleType:
    if not path.is_file():
        what = "is not a file" if path.exists() else "no such file"
        raise SystemSpecError(f"{path}: {what}")
    digest = short_digest(str(path.resolve()), 12)
    name = f"nhfast_user_{path.stem if path.stem.isidentifier() else 'system'}_{digest}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise SystemSpecError(f"{path}: cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling look the module up
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # the user's code: any failure is reported, not a traceback
        sys.modules.pop(name, None)
        raise SystemSpecError(f"{path}: importing it raised {type(exc).__name__}: {exc}") from exc
    return module


def load_factory(path: Path, factory: str) -> Callable[..., Any]:
    """The callable ``factory`` of the Python file ``path``.

    Parameters
    ----------
    path : pathlib.Path
        A Python file, imported as a module of its own.
    factory : str
        A name defined there.

    Returns
    -------
    callable

    Raises
    ------
    SystemSpecError
        No such file, an import that raises, no such name, or a name that is not callable.
    """
    module = _import(path)
    fn = getattr(module, factory, None)
    if fn is None:
        have = sorted(
            k for k, v in vars(module).items() if callable(v) and not k.startswith("_")
            and getattr(v, "__module__", None) == module.__name__
        )  # fmt: skip
        listed = ", ".join(have) or "none"
        raise SystemSpecError(
            f"{path}: no factory {factory!r}; the functions defined there: {listed}"
        )
    if not callable(fn):
        raise SystemSpecError(
            f"{path}: {factory!r} is a {type(fn).__name__}, expected a function returning "
            f"{ACCEPTED}"
        )
    return fn


def load_user_system(
    target: str,
    kwargs: Mapping[str, Any] | None = None,
    params: Mapping[str, float] | None = None,
) -> Instance:
    """Import ``target`` (``path.py:factory``), call ``factory(**kwargs)``, build the Instance.

    Parameters
    ----------
    target : str
        ``"path/to/file.py:factory"``.
    kwargs : mapping, optional
        Keyword arguments of the factory (``nhfast run --arg KEY=VALUE``).
    params : mapping of str to float, optional
        Parameter values that add to or override the factory's (``--param NAME=VALUE``).

    Returns
    -------
    Instance

    Raises
    ------
    SystemSpecError
        For every way the file, the factory or its return value does not fit.
    """
    path, name = parse_target(target)
    factory = load_factory(path, name)
    try:
        obj = factory(**dict(kwargs or {}))
    except Exception as exc:  # the user's code
        raise SystemSpecError(f"{target}: the factory raised {type(exc).__name__}: {exc}") from exc
    try:
        return to_instance(obj, name=target, params=params)
    except SystemSpecError as exc:
        raise SystemSpecError(f"{target}: {exc}") from exc
