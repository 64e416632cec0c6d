"""``nhfast run FILE.py:FACTORY``: a user's system through the catalogue's checks and report;
every way the file or the factory can be wrong; the catalogue's new entries (issue 32 item 4).

Runs go through ``main(argv)`` in-process with few lanes and short times; one subprocess checks
the console (``python -m nhfast``, exit code 2, no traceback).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import sympy as sp

from nhfast.cli import main
from nhfast.errors import SystemSpecError
from nhfast.experiments import EXAMPLES, SystemSpec, build_example, run_example
from nhfast.experiments.entries import carriage_sigma
from nhfast.experiments.user import load_user_system

#: A user's file: the nonholonomic particle with a = 0 written from scratch as a
#: NonholonomicSystem (Hamel form), its claimed density and a claimed first integral, and
#: factories for every error case.
USER_FILE = '''
import numpy as np
import sympy as sp

from nhfast import VectorField
from nhfast.experiments import SystemSpec
from nhfast.symbolic.systems import ChaplyginSystem


def _particle(k):
    x, y, z = sp.symbols("x y z", real=True)
    return ChaplyginSystem(
        [x, y, z], sp.eye(3), k * (x**2 + y**2) / 2, constraints=sp.Matrix([[-y, 0, 1]]),
        shape=[x, y], group=[z], params=[k],
    )


def particle(k=1.0, claim=-0.5):
    system = _particle(sp.Symbol("k", positive=True))
    y = system.shape[1]
    return SystemSpec(
        system,
        params={"k": k},
        t_end=2.0,
        chart_t=1.0,
        density=(1 + y**2) ** sp.Rational(claim),
        source="García-Naranjo & Marrero (2020), Sec. 4.1 (a = 0)",
        title="my particle",
    )


def rotation(integral="r2"):
    """x' = -w y, y' = w x, z' = 0: x^2 + y^2 and z are first integrals, div X = 0."""
    x, y, z, w = sp.symbols("x y z w")
    vf = VectorField([x, y, z], [-w * y, w * x, 0], params=[w])
    return SystemSpec(
        vf,
        params=[2.0],
        observables={"r2": x**2 + y**2},
        integrals={integral: "geometry", "z": "z' = 0"},
        density=1,
        t_end=3.0,
    )


def bare():
    x, y = sp.symbols("x y")
    return VectorField([x, y], [y, -x], observables={"energy": (x**2 + y**2) / 2})


def with_params():
    x, w = sp.symbols("x w")
    return VectorField([x], [-w * x], params=[w])


def raises():
    raise RuntimeError("boom in the factory")


def wrong_type():
    return 42


def bad_sampler():
    x, y = sp.symbols("x y")
    vf = VectorField([x, y], [y, -x])
    return SystemSpec(vf, sampler=lambda rng, lanes: np.zeros((lanes, 3)))


def unknown_integral():
    x, y = sp.symbols("x y")
    return SystemSpec(VectorField([x, y], [y, -x]), integrals={"nope": "me"})


def bad_density():
    x, y, q = sp.symbols("x y q")
    return SystemSpec(VectorField([x, y], [y, -x]), density=1 + q**2)


NOT_A_FUNCTION = 3
'''


@pytest.fixture
def user_file(tmp_path: Path) -> Path:
    path = tmp_path / "my_system.py"
    path.write_text(USER_FILE)
    return path


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def _report(out_dir: Path) -> dict:
    return json.loads((out_dir / "report.json").read_text())


def test_user_chaplygin_system_runs_every_check_and_passes(user_file, tmp_path, capsys):
    out_dir = tmp_path / "rep"
    argv = ["run", f"{user_file}:particle", "--lanes", "8", "--out", str(out_dir), "--no-plots"]
    code, out, err = _run(argv + ["--threads", "1", "--param", "k=2"], capsys)
    assert code == 0, out + err
    data = _report(out_dir)
    names = [c["name"] for c in data["checks"]]
    verdicts = {c["name"]: c["holds"] for c in data["checks"]}
    # the catalogue's check families, in the catalogue's order
    assert names[0] == "energy conservation (energy)"
    assert "measure 1/sqrt(y**2 + 1) (numerical)" in names
    assert "density discovery: exp(sigma(y)) (numerical)" in names
    assert names[-1].startswith("Hamiltonisable by dt = exp(-phi) dtau")
    assert verdicts["measure 1/sqrt(y**2 + 1) (numerical)"] is True
    assert verdicts["density discovery: exp(sigma(y)) (numerical)"] is True
    # no claim about the reduction: the symbolic tests report their finding, undecided
    sym = next(c for c in data["checks"] if c["name"] == "basic invariant measure (symbolic)")
    assert sym["holds"] is None and "sigma = -log(y**2 + 1)/2" in sym["statement"]
    assert "no claim to compare" in sym["statement"]
    assert all(c["holds"] is not False for c in data["checks"])
    assert sum(c["holds"] is True for c in data["checks"]) >= 8
    assert data["settings"]["example"] == f"{user_file}:particle"
    assert data["settings"]["parameters given"] == "k=2"
    assert data["system"]["parameters"] == {"k": 2.0}
    assert data["title"] == "my particle"
    text = (out_dir / "report.txt").read_text()
    assert text in out  # the same table as the catalogue's
    assert "Verdicts:" in out


def test_a_false_claim_fails_with_exit_code_1(user_file, tmp_path, capsys):
    """The exponent -1/4 is not the particle's -1/2: the numerical checks must say so."""
    out_dir = tmp_path / "rep"
    argv = ["run", f"{user_file}:particle", "--arg", "claim=-0.25", "--lanes", "8"]
    code, out, err = _run(argv + ["--out", str(out_dir), "--no-plots", "--quiet"], capsys)
    assert code == 1, out + err
    verdicts = {c["name"]: c["holds"] for c in _report(out_dir)["checks"]}
    assert verdicts["measure (y**2 + 1)**(-1/4) (numerical)"] is False
    assert verdicts["energy conservation (energy)"] is True
    assert "FAIL  measure (y**2 + 1)**(-1/4) (numerical)" in out


def test_vector_field_with_claimed_integrals(user_file, tmp_path, capsys):
    out_dir = tmp_path / "rep"
    argv = ["run", f"{user_file}:rotation", "--lanes", "4", "--out", str(out_dir), "--no-plots"]
    code, out, err = _run(argv, capsys)
    assert code == 0, out + err
    checks = {c["name"]: c for c in _report(out_dir)["checks"]}
    assert checks["first integral r2"]["holds"] is True
    assert checks["first integral r2"]["figures"]["claimed by"] == "geometry"
    assert checks["first integral z"]["holds"] is True  # a state named as an integral
    assert checks["measure Lebesgue (numerical)"]["holds"] is True
    # no energy observable, no Chaplygin system: reported, not left out
    for name in (
        "energy conservation",
        "basic invariant measure (symbolic)",
        "phi-simple, Hamiltonisable (symbolic)",
        "Hamiltonisation in the Chaplygin chart (numerical)",
    ):
        assert checks[name]["holds"] is None
        assert checks[name]["statement"].startswith("not run: needs ")
    assert "----  energy conservation: not run: needs an energy observable" in out


def test_a_false_integral_fails(user_file, tmp_path, capsys):
    """x is not a first integral of the rotation: the drift check must fail."""
    out_dir = tmp_path / "rep"
    argv = ["run", f"{user_file}:rotation", "--arg", "integral=x", "--lanes", "4"]
    code, out, err = _run(argv + ["--out", str(out_dir), "--no-plots", "--quiet"], capsys)
    assert code == 1, out + err
    checks = {c["name"]: c for c in _report(out_dir)["checks"]}
    assert checks["first integral x"]["holds"] is False
    assert checks["first integral x"]["figures"]["max |dI|"] > 0.1
    assert checks["first integral z"]["holds"] is True
    assert _report(out_dir)["settings"]["factory arguments"] == "integral='x'"


def test_bare_vector_field_reports_what_is_missing(user_file, tmp_path, capsys):
    out_dir = tmp_path / "rep"
    argv = ["run", f"{user_file}:bare", "--lanes", "4", "--t", "1", "--out", str(out_dir)]
    code, out, err = _run(argv + ["--no-plots", "--quiet"], capsys)
    assert code == 0, out + err
    checks = {c["name"]: c for c in _report(out_dir)["checks"]}
    assert checks["energy conservation (energy)"]["holds"] is True
    claims = checks["measure claims (numerical)"]
    assert claims["holds"] is None and "needs a claimed density" in claims["statement"]


@pytest.mark.parametrize(
    "target, message",
    [
        ("{dir}/missing.py:f", "missing.py: no such file"),
        ("{file}:nope", "no factory 'nope'; the functions defined there: bad_density, bad_sampler"),
        ("{file}:NOT_A_FUNCTION", "'NOT_A_FUNCTION' is a int, expected a function returning"),
        ("{file}:raises", "the factory raised RuntimeError: boom in the factory"),
        ("{file}:wrong_type", "expected a SystemSpec, a VectorField"),
        ("{file}:with_params", "params: no value for w; give SystemSpec(params={...}) or --param"),
        ("{file}:bad_sampler", "sampler: expected an array of shape (lanes, 2)"),
        ("{file}:unknown_integral", "integrals: the vector field has no observable 'nope'"),
        ("{file}:bad_density", "density: uses q, which are neither states (x, y)"),
        ("{file}", "expected PATH.py:FACTORY"),
        ("{dir}:f", "expected a Python file"),
    ],
)
def test_user_errors_exit_2_with_one_line(user_file, target, message, capsys):
    target = target.format(file=user_file, dir=user_file.parent)
    code, out, err = _run(["run", target, "--lanes", "2", "--no-plots"], capsys)
    assert code == 2
    assert message in err, err
    assert err.startswith("nhfast: error: ") and err.count("\n") == 1
    assert "Traceback" not in err


def test_import_error_and_option_misuse(tmp_path, user_file, capsys):
    broken = tmp_path / "broken.py"
    broken.write_text("import nhfast_no_such_module\n")
    code, _, err = _run(["run", f"{broken}:f"], capsys)
    assert code == 2 and "importing it raised ModuleNotFoundError" in err
    for argv, match in (
        (["run", "disk", "--param", "m=1"], "argument --param: only for a system of your own"),
        (["run", "disk", "--arg", "a=1"], "argument --arg: only for a system of your own"),
        (["run", f"{user_file}:particle", "--param", "k"], "argument --param: expected NAME=VALUE"),
        (["run", f"{user_file}:particle", "--inertia", "physical"], "argument --inertia: only"),
        (["run", "nope"], "argument EXAMPLE: invalid choice: 'nope' (choose from veselova"),
    ):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2
        assert match in capsys.readouterr().err


def test_library_errors_are_system_spec_errors(user_file):
    with pytest.raises(SystemSpecError, match="the factory raised RuntimeError"):
        load_user_system(f"{user_file}:raises")
    inst = load_user_system(f"{user_file}:particle", {"k": 3.0})
    np.testing.assert_array_equal(inst.params, [3.0])
    with pytest.raises(SystemSpecError, match="params: unknown q; the parameters are k"):
        load_user_system(f"{user_file}:particle", params={"q": 1.0})


def test_console_user_error_subprocess(user_file, tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "nhfast", "run", f"{user_file}:raises"],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ),
        cwd=tmp_path,
    )
    assert proc.returncode == 2
    assert "the factory raised RuntimeError: boom in the factory" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_console_user_system_subprocess(user_file):
    """``python -m nhfast run my_system.py:rotation`` from the file's directory; and ``check``."""
    base = [sys.executable, "-m", "nhfast"]
    for argv in (["run"], ["check", "measure"]):
        proc = subprocess.run(
            [*base, *argv, "my_system.py:rotation", "--lanes", "4", "--quiet", "--no-plots"],
            capture_output=True,
            text=True,
            timeout=120,
            env=dict(os.environ),
            cwd=user_file.parent,
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "PASS  measure Lebesgue (numerical)" in proc.stdout
        assert ("PASS  first integral r2" in proc.stdout) == (argv == ["run"])
    assert (user_file.parent / "nhfast-report-rotation" / "report.json").is_file()


def test_run_example_takes_a_system_spec():
    x, y = sp.symbols("x y")
    from nhfast import VectorField

    vf = VectorField([x, y], [y, -x], observables={"energy": (x**2 + y**2) / 2})
    spec = SystemSpec(vf, density=sp.exp(x), t_end=1.0, title="oscillator")
    report, res = run_example(spec, lanes=4, checks=("drift", "measure"))
    assert report.title == "oscillator" and res is not None
    verdicts = {c.name: c.holds for c in report.checks}
    assert verdicts["energy conservation (energy)"] is True
    assert verdicts["measure exp(x) (numerical)"] is False  # exp(x) is not invariant


# --------------------------------------------------------------------- the catalogue ----
NEW_ENTRIES = ("ball", "suslov", "carriage", "unicycle", "heisenberg")


def test_examples_lists_every_system_of_the_package(capsys):
    code, out, _ = _run(["examples"], capsys)
    assert code == 0
    listed = {ln.split()[0]: ln for ln in out.strip().splitlines()}
    assert set(listed) == set(EXAMPLES)
    assert {"veselova", "particle", "particle-a0", "disk", "sleigh", *NEW_ENTRIES} <= set(listed)
    assert "integrals <M, gamma>, <M, M>" in listed["ball"]
    assert "no invariant measure" in listed["suslov"]


#: (entry, checks that must be decided and PASS, checks reported as not run).
ENTRY_CHECKS = {
    "ball": (
        [
            "constraints (gamma2 = 1)",
            "first integral M_gamma",
            "first integral M2",
            "measure (1 - m a^2 <gamma, (I + m a^2)^-1 gamma>)^(-1/2) (numerical)",
            "measure Lebesgue (control) (numerical)",
            "density discovery: exp(sigma(gamma1, gamma2, gamma3)) (numerical)",
        ],
        [
            "basic invariant measure (symbolic)",
            "Hamiltonisation in the Chaplygin chart (numerical)",
        ],
    ),
    "suslov": (
        [
            "constraints (gamma_norm = 1, momentum_constraint = 0) (structured numeric)",
            "measure Lebesgue (Liouville volume) (structured numeric)",
        ],
        ["phi-simple, Hamiltonisable (structured numeric)"],
    ),
    "carriage": (
        [
            "first integral Y_alpha2_X_omega2",
            "basic invariant measure (symbolic)",
            "measure exp(-(Y R / 2)(psi1 + psi2)) (numerical)",
            "measure Lebesgue ds dp (control) (numerical)",
            "phi-simple, Hamiltonisable (symbolic)",
        ],
        [],
    ),
    "unicycle": (
        [
            "first integral p_phi",
            "first integral p_theta",
            "basic invariant measure (symbolic)",
            "measure Lebesgue (numerical)",
            "phi-simple, Hamiltonisable (symbolic)",
        ],
        [],
    ),
    "heisenberg": (
        ["first integral v_1", "first integral v_2", "measure Lebesgue (numerical)"],
        ["basic invariant measure (symbolic)"],
    ),
}


@pytest.mark.parametrize("name", NEW_ENTRIES)
def test_new_entry_runs_and_agrees_with_its_claims(name, tmp_path, capsys):
    out_dir = tmp_path / name
    argv = ["run", name, "--lanes", "16", "--out", str(out_dir), "--no-plots", "--quiet"]
    code, out, err = _run(argv + ["--threads", "1"], capsys)
    assert code == 0, out + err
    checks = {c["name"]: c for c in _report(out_dir)["checks"]}
    passing, not_run = ENTRY_CHECKS[name]
    energy = next(k for k in checks if k.startswith("energy conservation (energy)"))
    for key in [energy, *passing]:
        assert checks[key]["holds"] is True, (key, checks[key]["statement"])
    for key in not_run:
        assert checks[key]["holds"] is None
        assert checks[key]["statement"].startswith("not run: needs "), checks[key]
    assert all(c["holds"] is not False for c in checks.values())


def test_carriage_density_solves_the_liouville_equation_exactly():
    """Independent of invariant_measure: X[sigma] + div X = 0 for the reduced field, symbolically
    (sigma = -(m0 l R^3 / (2 (J R^2 + 2 J2 c^2))) (psi1 + psi2)), and not for sigma = 0."""
    inst = build_example("carriage")
    vf = inst.vector_field
    sigma = carriage_sigma(inst.chaplygin)
    div = sum(sp.diff(f, s) for f, s in zip(vf.rhs, vf.states, strict=True))
    along = sum(sp.diff(sigma, s) * f for f, s in zip(vf.rhs, vf.states, strict=True))
    assert sp.simplify(along + div) == 0
    assert sp.simplify(div) != 0


def test_suslov_size_option(tmp_path, capsys):
    out_dir = tmp_path / "s4"
    argv = ["run", "suslov", "--n", "4", "--lanes", "8", "--t", "5", "--out", str(out_dir)]
    code, out, err = _run(argv + ["--no-plots", "--quiet"], capsys)
    assert code == 0, out + err
    data = _report(out_dir)
    assert data["system"]["n"] == 4 and data["system"]["state dimension"] == 8
    with pytest.raises(SystemExit):
        main(["run", "suslov", "--n", "2"])
    assert "argument --n: example 'suslov' needs n >= 3" in capsys.readouterr().err


def test_catalogue_claims_cite_papers_by_author_and_year():
    text = " ".join(c.source for name in NEW_ENTRIES for c in build_example(name).measure_claims)
    for who in ("Chaplygin (1903)", "Fedorov & Kozlov (1995)", "Crampin & Mestdag (2010)"):
        assert who in text
