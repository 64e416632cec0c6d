"""The claims table ``tests/CLAIMS.md`` is kept true: every test it names exists, counts add up.

``tests/CLAIMS.md`` grades every computable claim of the five seed papers by the strongest test
of the default suite that checks it. This file reads the table and checks that

- each row has an ID, a claim, a source, tests and one of the allowed strengths;
- every ``path.py::test_name`` it cites exists under ``tests/`` (a ``def`` of that name in that
  file), so a renamed or deleted test cannot leave a claim graded by a test that is gone;
- a row graded EXACT or NUMERIC cites at least one test;
- the table of counts per strength equals the counts of the rows.

Run it as a script to print the counts table for the current rows:
``python tests/test_claims.py``.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from functools import cache
from pathlib import Path

TESTS = Path(__file__).resolve().parent
CLAIMS = TESTS / "CLAIMS.md"
STRENGTHS = ("EXACT", "NUMERIC", "WEAK", "SKIPPED", "NONE")
SEEDS = ("000", "001", "002", "003", "004")

_ROW = re.compile(r"^\|\s*(\d{3})-(\d+)\s*\|")
_CELL = re.compile(r"(?<!\\)\|")  # a cell boundary: a bar not escaped as \|
_REF = re.compile(r"(?:([\w/.-]+\.py))?::(\w+)")


def rows(text: str) -> list[list[str]]:
    """The claim rows of the table: [id, claim, source, tests, strength] each."""
    out = []
    for line in text.splitlines():
        if _ROW.match(line):
            cells = [c.strip() for c in _CELL.split(line.strip().strip("|"))]
            out.append(cells)
    return out


def strength(cell: str) -> str:
    """The grade of a row: the first word of its strength cell (``EXACT (slow-only)`` -> EXACT)."""
    word = cell.split()[0] if cell.split() else ""
    return word.strip("*").upper()


def references(cell: str) -> list[tuple[str, str]]:
    """(file, test) pairs cited in a tests cell; ``::name`` refers to the last file named."""
    refs, last = [], None
    for path, name in _REF.findall(cell):
        if path:
            last = path
        if last is None:
            continue
        refs.append((last, name))
    return refs


@cache
def _defined(path: Path) -> frozenset[str]:
    tree = ast.parse(path.read_text())
    return frozenset(
        n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
    )


@cache
def _slow(path: Path) -> frozenset[str]:
    """Tests of ``path`` marked ``slow`` (excluded from the default suite), by decorator or by a
    module-level ``pytestmark``."""
    tree = ast.parse(path.read_text())
    text = path.read_text()
    module_slow = any(
        isinstance(n, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in n.targets)
        and "slow" in ast.get_source_segment(text, n.value)
        for n in tree.body
    )
    out = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef):
            marks = [ast.get_source_segment(text, d) or "" for d in n.decorator_list]
            if module_slow or any(m.endswith("mark.slow") for m in marks):
                out.add(n.name)
    return frozenset(out)


def counts(table: list[list[str]]) -> dict[str, Counter]:
    """Per seed, the number of rows of each strength."""
    out: dict[str, Counter] = {s: Counter() for s in SEEDS}
    for r in table:
        out[r[0].split("-")[0]][strength(r[4])] += 1
    return out


def counts_table(table: list[list[str]]) -> str:
    """The markdown table of counts per strength, as CLAIMS.md shows it."""
    c = counts(table)
    head = "| strength | " + " | ".join(f"seed {s}" for s in SEEDS) + " | total |"
    lines = [head, "|---" * (len(SEEDS) + 2) + "|"]
    for st in STRENGTHS:
        vals = [c[s][st] for s in SEEDS]
        lines.append(f"| {st} | " + " | ".join(map(str, vals)) + f" | **{sum(vals)}** |")
    vals = [sum(c[s].values()) for s in SEEDS]
    lines.append("| rows | " + " | ".join(map(str, vals)) + f" | **{sum(vals)}** |")
    return "\n".join(lines)


def _table() -> list[list[str]]:
    return rows(CLAIMS.read_text())


def test_every_row_is_well_formed():
    table = _table()
    assert len(table) >= 178, f"{len(table)} claim rows; the digests have 178"
    ids = [r[0] for r in table]
    assert len(ids) == len(set(ids)), "duplicate claim IDs"
    bad = [r[0] for r in table if len(r) != 5 or strength(r[4]) not in STRENGTHS]
    assert not bad, f"rows without 5 cells or with an unknown strength: {bad}"


def test_cited_tests_exist():
    missing = []
    for r in _table():
        for path, name in references(r[3]):
            f = TESTS / path
            if not f.is_file() or name not in _defined(f):
                missing.append(f"{r[0]}: {path}::{name}")
    assert not missing, "CLAIMS.md cites tests that do not exist:\n" + "\n".join(missing)


def test_graded_rows_cite_a_test():
    bare = [
        r[0] for r in _table() if strength(r[4]) in ("EXACT", "NUMERIC") and not references(r[3])
    ]
    assert not bare, f"rows graded EXACT/NUMERIC without a test: {bare}"


def test_graded_rows_cite_a_default_suite_test():
    """A row is graded by the default suite: EXACT/NUMERIC needs a cited test that is not slow."""
    slow_only = []
    for r in _table():
        refs = references(r[3])
        if strength(r[4]) in ("EXACT", "NUMERIC") and refs:
            if all(name in _slow(TESTS / path) for path, name in refs):
                slow_only.append(r[0])
    assert not slow_only, f"rows graded EXACT/NUMERIC by slow tests only: {slow_only}"


def test_counts_table_matches_the_rows():
    text = CLAIMS.read_text()
    expect = counts_table(rows(text))
    assert expect in text, "the counts table is stale; replace it with:\n" + expect


if __name__ == "__main__":
    print(counts_table(_table()))
