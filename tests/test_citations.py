"""Text a user reads cites the source papers by authors, year and section, nothing internal.

Every string literal and docstring of the package (found with :mod:`ast`, so comments are not
read) and README.md are searched for citations of the project's private notes: "seed 004",
"the digest", "digest Sec. 4.4", "spec/seed000.md", author initials such as "J-R 2019",
checklist and oracle labels ("O-U5", "O18", "000-40", "[S2.2-6]", "erratum F6") and the design
notes' file names. A citation names the authors (surname, "et al." beyond two), the year and the
section, theorem or equation, e.g. "García-Naranjo & Marrero (2020), Thm. 4.3".

"digest" is also an ordinary word of the package (``kernel_set_digest``, "a hex digest", "a
plain-text digest"); only its use as a citation is flagged.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import nhfast

PACKAGE = Path(nhfast.__file__).resolve().parent
README = Path(__file__).resolve().parents[1] / "README.md"

#: (what is wrong, pattern).  Case-insensitive unless the pattern says otherwise.
FORBIDDEN = (
    ("seed number", r"\bseeds?\s*(?:paper\s*)?0\d\d\b"),
    ("seed paper", r"\bseed(?:'s|s'|\s+papers?)\b|\bthe\s+seeds\b"),
    ("digest cited", r"\b(?:the|seed\s*\d*|digest'?s?)\s+digests?\b"),
    ("digest cited", r"\bdigests?'"),
    ("digest cited", r"\bdigests?\s+(?:sec\b|sec\.|section|row|oracle|[A-Z]+\d|spec\b|``|seed)"),
    ("digest cited", r"\b(?:derived|checked|stated|given)\s+in\s+(?:the|a)\s+digest"),
    ("internal file", r"\bspec/|\bseed\d{3}(?:_\d{3})?\.md\b|\bCLAIMS\.md\b|(?-i:\bDESIGN\b)"),
    (
        "initials",
        r"(?-i:\b[A-Z]{1,3}-[A-Z]{1,3}\b)\s*\(?(?:19|20)\d\d\b|(?-i:\b(?:J-R|C-M|M-C|G-M)\b)",
    ),
    ("checklist label", r"(?-i:\bO-[A-Z]{1,2}\d+\b)|\b00[0-4]-\d+\b"),
    ("oracle label", r"(?-i:(?<![-\w])[OV]\d{1,2}\b)"),
    # ``SymbolicVerdict.conditions`` keeps its keys "(S5-2)", "(S5-3)" (public data, used by
    # callers): the quoted key is allowed, the label as a citation is not.
    ("frame-display label", r'\[S\d+(?:\.\d+)?-\d+\]|(?<!")\(S\d+(?:\.\d+)?-\d+\)(?!")'),
    ("erratum label", r"\berrat(?:um|a)\s+[A-Z]\d+\b"),
)
_COMPILED = [(what, re.compile(pat, re.I)) for what, pat in FORBIDDEN]

#: The keys of the consistency test's ``SymbolicVerdict.conditions`` (public data, kept).
CONDITION_KEYS = {"(S5-2)", "(S5-3)"}


def offences(text: str) -> list[str]:
    """``"what: 'match'"`` for every forbidden citation in ``text``."""
    return [f"{what}: {m.group(0)!r}" for what, rx in _COMPILED for m in rx.finditer(text)]


def strings(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every string literal of a Python file, docstrings and f-string parts."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and node.value not in CONDITION_KEYS
    ]


def python_files() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


@pytest.mark.parametrize(
    "text, bad",
    [
        ("seed 004 Theorem 4.3", True),
        ("Seed 000 Thm. 4.8(c)", True),
        ("seed 004 digest Sec. 4.4 (any inertia)", True),
        ('Jozwikowski & Respondek (2019) ("J-R 2019" below)', True),
        ("(J-R 2019, Thm. 4.8(a))", True),
        ("C-M's constraints", True),
        ("derived in the digest (Sec. 4.4, O18)", True),
        ("the digests' test system T3 (spec ``seed002_003.md``)", True),
        ("along the O-C6 trajectory", True),
        ("seed 001 [S2.2-6]/[S3-8]", True),
        ("residuals (S5-2) and (S5-3)", True),
        ('conditions ``"(S5-2)"`` (``r`` entries)', False),
        ("Seed 003 (18) read literally (erratum F6)", True),
        ("the seed's inertia I(Om) = A Om A", True),
        ("agrees with the claim of the seed paper", True),
        ("(DESIGN section 4)", True),
        ("García-Naranjo & Marrero (2020), Thm. 4.3", False),
        ("Martínez et al. (2000), (18)", False),
        ("derived here from García-Naranjo & Marrero (2020), Sec. 4.2 (not stated)", False),
        ("kernel_set_digest, a hex digest, a plain-text digest: one line per check", False),
        ("Digests that determine the kernels' expressions", False),
        ("seed of the initial states (0)", False),
        ("inertia 'seed' is now called 'a-omega-a'", False),
        ("a G-Chaplygin system; opt = -O3; SO(3); x-z plane", False),
    ],
)
def test_patterns(text, bad):
    assert bool(offences(text)) is bad, offences(text)


def in_package(check) -> list[str]:
    """``file:line: finding`` for each finding of ``check`` in the package's strings."""
    found = []
    for path in python_files():
        for line, text in strings(path):
            found += [f"{path.relative_to(PACKAGE.parent)}:{line}: {o}" for o in check(text)]
    return found


def test_package_strings_cite_papers():
    found = in_package(offences)
    assert not found, "\n".join(found)


#: (how a paper is cited, words of its title): a module that cites the paper in its strings gives
#: the title in its module docstring (a references line is enough).
PAPERS = (
    (r"Jóźwikowski|Jozwikowski", "A comparison of vakonomic and nonholonomic dynamics"),
    (r"Crampin (?:&|and) Mestdag", "Anholonomic frames in constrained dynamics"),
    (r"Mestdag (?:&|and) Crampin", "Nonholonomic systems as restricted Euler-Lagrange systems"),
    (r"Martínez|Martinez", "the vakonomic bracket"),
    (r"García-Naranjo|Garcia-Naranjo", "The geometry of nonholonomic Chaplygin systems revisited"),
)


def test_modules_give_the_titles_they_cite():
    missing = []
    for path in python_files():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        text = " ".join(s for _, s in strings(path))
        doc = " ".join((ast.get_docstring(tree) or "").split())
        missing += [
            f"{path.relative_to(PACKAGE.parent)}: {title!r}"
            for cite, title in PAPERS
            if re.search(cite, text) and title.lower() not in doc.lower()
        ]
    assert not missing, "\n".join(missing)


#: (how a paper is cited, its sections): "Authors (year), Sec. x" must name a section the paper
#: has (the private notes number their own sections differently).
SECTIONS = (
    (r"Respondek", {"1", "2", "3", "4", "4.1", "4.2", "5", "6"}),
    (
        r"Crampin (?:&|and) Mestdag",
        {"1", "2", "2.1", "2.2", "2.3", "3", "4", "5", "6", "7", "7.1", "7.2"},
    ),
    (r"Mestdag (?:&|and) Crampin", {"1", "2", "3", "4", "5"}),
    (r"Martínez|Martinez", {"I", "II", "III", "IV", "V", "VI", "VII", "VIII"}),
    (
        r"Marrero",
        {"1", "2", "2.1", "2.2", "2.3", "3", "3.1", "3.2", "3.3", "3.4", "3.5", "3.6", "4", "4.1"}
        | {"4.2", "5", "A", "B"},
    ),
)
_SECTION = re.compile(
    r"(?P<who>Respondek|Crampin (?:&|and) Mestdag|Mestdag (?:&|and) Crampin|Martínez|Martinez"
    r"|Marrero)[^\"()]{0,30}?\(?(?:19|20)\d\d\)?,?\s*(?:Secs?\.|Sections?)\s*"
    r"(?P<secs>{tok}(?:\s*(?:-|–|,|and)\s*{tok})*)".replace(
        "{tok}", r"(?:\d+(?:\.\d+)*|[IVXAB]+)\b"
    )
)


def wrong_sections(text: str) -> list[str]:
    """Sections cited for a paper that the paper does not have."""
    text = " ".join(text.split())
    bad = []
    for m in _SECTION.finditer(text):
        known = next(s for who, s in SECTIONS if re.fullmatch(who, m.group("who")))
        for sec in re.split(r"\s*(?:-|–|,|and)\s*", m.group("secs")):
            if sec.rstrip(".") not in known:
                bad.append(f"{m.group(0)!r}: no section {sec.rstrip('.')}")
    return bad


@pytest.mark.parametrize(
    "text, bad",
    [
        ("(Jozwikowski & Respondek 2019, Sec. 2.7)", True),
        ("García-Naranjo & Marrero (2020), Sec. 4.4 (any inertia)", True),
        ("García-Naranjo and Marrero 2020, Sec. 3.4-3.5", False),
        ("Martínez et al. (2000), Sections III, V and VII", False),
        ("Crampin & Mestdag (2010), Sec. 7.2.", False),
        ("Crampin & Mestdag 2010, Sec. 4, Prop. 3", False),
    ],
)
def test_section_patterns(text, bad):
    assert bool(wrong_sections(text)) is bad, wrong_sections(text)


def test_cited_sections_exist():
    found = in_package(wrong_sections)
    if README.exists():
        found += [f"README.md: {w}" for w in wrong_sections(README.read_text(encoding="utf-8"))]
    assert not found, "\n".join(found)


def test_extension_source_cites_papers():
    found = []
    for path in sorted(PACKAGE.rglob("*.pyx")) + sorted(PACKAGE.rglob("*.pyi")):
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            found += [f"{path.name}:{i}: {o}" for o in offences(line)]
    assert not found, "\n".join(found)


@pytest.mark.skipif(not README.exists(), reason="README.md is not beside the tests")
def test_readme_cites_papers():
    found = []
    for i, line in enumerate(README.read_text(encoding="utf-8").splitlines(), 1):
        found += [f"README.md:{i}: {o}" for o in offences(line)]
    assert not found, "\n".join(found)
