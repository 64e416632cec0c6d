"""The examples in the docstrings of the package run as written (``doctest``).

Every module of ``nhfast`` whose docstrings hold ``>>>`` examples is collected; examples that
need a cluster are marked ``# doctest: +SKIP`` where they stand.
"""

from __future__ import annotations

import doctest
import importlib
import importlib.util
import pkgutil

import pytest

import nhfast


def _modules_with_examples() -> list[str]:
    names = []
    for info in pkgutil.walk_packages(nhfast.__path__, "nhfast."):
        if info.name.endswith("__main__"):
            continue
        spec = importlib.util.find_spec(info.name)
        origin = getattr(spec, "origin", None) or ""
        if origin.endswith(".py"):
            with open(origin, encoding="utf-8") as fh:
                if ">>>" in fh.read():
                    names.append(info.name)
    return names


@pytest.mark.parametrize("name", _modules_with_examples())
def test_docstring_examples_run(name: str, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    module = importlib.import_module(name)
    flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    result = doctest.testmod(module, optionflags=flags, report=True, verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples of {name} failed"
