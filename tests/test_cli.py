"""The ``nhfast`` command: run / check / examples / cache, report files, bad arguments.

Runs go through ``main(argv)`` in-process (kernel cache from tests/conftest.py), with few lanes
and short times; one subprocess run checks the console behaviour (exit code 2, no traceback).
The runner and the checks themselves are tested in tests/experiments/.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from nhfast.cli import main
from nhfast.experiments import EXAMPLES
from nhfast.experiments.checks import FORM

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _run(argv, capsys):
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_examples_lists_every_entry_one_line_each(capsys):
    code, out, _ = _run(["examples"], capsys)
    assert code == 0
    lines = out.strip().splitlines()
    assert [ln.split()[0] for ln in lines] == list(EXAMPLES)


def test_run_writes_report_with_every_check(tmp_path, capsys):
    out_dir = tmp_path / "rep"
    # the particle with a = 1/2 (no measure, not phi-simple: the flow checks are skipped)
    argv = ["run", "particle", "--lanes", "8", "--t", "1", "--out", str(out_dir)]
    code, out, err = _run(argv + ["--threads", "1", "--seed", "2"], capsys)
    assert code == 0, out + err
    lines = out.splitlines()
    marks = ("  PASS  ", "  FAIL  ", "  ----  ")
    verdicts = [i for i, s in enumerate(lines) if s.startswith(marks)]
    data = json.loads((out_dir / "report.json").read_text())
    assert len(verdicts) == len(data["checks"]) == 8
    assert all(lines[i].startswith("  PASS  ") for i in verdicts)
    assert max(verdicts) < lines.index("Figures") < lines.index("Timings [s]")
    assert f"Verdicts: {len(verdicts)} pass, 0 fail, 0 undecided" in out
    assert data["settings"]["trajectories"] == 8 and data["settings"]["seed"] == 2
    names = [c["name"] for c in data["checks"]]
    assert names[0] == "energy conservation (energy)"
    assert "basic invariant measure (symbolic)" in names
    assert "measure Lebesgue dx dy dp (basic, sigma = 0) (numerical)" in names
    assert "density discovery: exp(sigma(x, y)) (numerical)" in names
    assert "phi-simple, Hamiltonisable (symbolic)" in names
    assert names[-1].startswith("Hamiltonisable by dt = exp(-phi) dtau")
    # every statement and figure name printed in the text table is in the JSON and vice versa
    text = (out_dir / "report.txt").read_text()
    assert text in out  # the terminal shows exactly the saved table
    for c in data["checks"]:
        assert c["statement"][:290] in text  # statements longer than 300 are clipped
        for k in c["figures"]:
            assert k in text
    energy = data["checks"][0]
    assert len(energy["series"]["t"]) == 201 and len(energy["samples"]) == 1
    assert energy["figures"]["max |dE|/|E0|"] < 1e-9
    index = (out_dir / "report.md").read_text()
    pngs = sorted(out_dir.glob("*.png"))
    n_plots = sum(bool(c["series"]) + bool(c["samples"]) for c in data["checks"])
    assert len(pngs) == n_plots >= 4
    for p in pngs:
        raw = p.read_bytes()
        assert raw[:8] == PNG_SIGNATURE and len(raw) > 1000
        assert f"`{p.name}`" in index
    # the measure-defect plots exist (series vs time and per-trajectory histogram)
    assert any("measure_lebesgue_dx_dy_dp_basic_sigma_0_numerical_series" in p.name for p in pngs)
    assert any("measure_lebesgue_dx_dy_dp_basic_sigma_0_numerical_hist" in p.name for p in pngs)


def test_run_fixed_step_method_and_failed_check_exit_code(tmp_path, capsys):
    # rk4 with a coarse step on the particle (potential (x^2 + y^2)/2): the energy error is far
    # above 1e-12, so the energy check FAILs and the exit code is 1
    argv = ["run", "particle-a0", "--lanes", "4", "--t", "20", "--method", "rk4", "--h", "0.1"]
    argv += ["--out", str(tmp_path), "--no-plots", "--quiet", "--drift-tol", "1e-12"]
    code, out, _ = _run(argv, capsys)
    data = json.loads((tmp_path / "report.json").read_text())
    energy = data["checks"][0]
    assert data["settings"]["h"] == 0.1 and data["settings"]["method"] == "rk4"
    # 201 output times on [0, 20]: one rk4 step of 0.1 per output interval
    assert data["settings"]["effective step"] == pytest.approx(0.1, rel=1e-12)
    assert energy["holds"] is False and energy["figures"]["max |dE|/|E0|"] > 1e-9
    assert code == 1
    assert out.splitlines()[0].startswith("FAIL  energy conservation")
    assert not list(tmp_path.glob("*.png"))
    # the same run with a threshold above the rk4 error passes
    code, out, _ = _run(argv[:-1] + ["1e-3"], capsys)
    assert code == 0 and out.splitlines()[0].startswith("PASS  energy conservation")


@pytest.mark.parametrize("what", ["measure", "hamiltonisation"])
def test_check_subcommands(tmp_path, capsys, what):
    argv = ["check", what, "particle-a0", "--lanes", "4", "--t", "1", "--out", str(tmp_path)]
    code, out, err = _run(argv + ["--no-plots"], capsys)
    assert code == 0, out + err
    data = json.loads((tmp_path / "report.json").read_text())
    names = [c["name"] for c in data["checks"]]
    assert not any("energy" in n for n in names)  # only the requested family
    if what == "measure":
        assert names == [
            "basic invariant measure (symbolic)",
            "measure (1 + y^2)^(-1/2) (numerical)",
            "measure Lebesgue dx dy dp (basic, sigma = 0) (numerical)",
            "density discovery: exp(sigma(x, y)) (numerical)",
        ]
        spread = data["checks"][3]["figures"]["spread of sigma_fit - sigma_claimed on the samples"]
        assert spread < 1e-8
        assert data["checks"][1]["figures"]["expected"] == "invariant"
        assert data["checks"][2]["figures"]["expected"] == "not invariant"
        assert len(data["checks"][1]["samples"]["final defect"]) == 4
    else:
        assert names[0] == "phi-simple, Hamiltonisable (symbolic)"
        assert names[-1].startswith("Hamiltonisable by dt = exp(-phi) dtau")
        assert len(names) > 3
    assert all(c["holds"] is True for c in data["checks"]), [c["statement"] for c in data["checks"]]


@pytest.mark.parametrize(
    "argv,match",
    [
        (["run", "nope"], "argument EXAMPLE: invalid choice: 'nope'"),
        (["run", "veselova", "--n", "3", "--method", "leapfrog"], "argument --method: leapfrog"),
        (["run", "veselova", "--lanes", "0"], "argument --lanes: expected a positive integer"),
        (["run", "veselova", "--lanes", "x"], "argument --lanes: expected a positive integer"),
        (["run", "veselova", "--t", "-1"], "argument --t: expected a positive finite number"),
        (["run", "veselova", "--t", "inf"], "argument --t: expected a positive finite number"),
        (["run", "veselova", "--n", "2"], "argument --n: example 'veselova' needs n >= 3"),
        (["run", "disk", "--n", "4"], "argument --n: example 'disk' has no size parameter"),
        (["run", "veselova", "--method", "euler"], "argument --method: invalid choice"),
        (["run", "veselova", "--seed", "-3"], "argument --seed: expected an integer >= 0"),
        (["run", "veselova", "--threads", "0"], "argument --threads: expected a positive"),
        (["check", "energy", "veselova"], "argument what: invalid choice: 'energy'"),
        (["cache", "purge"], "argument action: invalid choice: 'purge'"),
        (["run", "veselova", "--inertia", "round"], "argument --inertia: invalid choice"),
        (["run", "disk", "--inertia", "physical"], "argument --inertia: example 'disk' has no"),
        ([], "the following arguments are required: COMMAND"),
    ],
)
def test_bad_arguments_exit_2_naming_the_argument(argv, match, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert match in err, err
    assert "Traceback" not in err


def test_out_is_a_file(tmp_path, capsys):
    f = tmp_path / "f"
    f.write_text("")
    with pytest.raises(SystemExit) as exc:
        main(["run", "disk", "--out", str(f)])
    assert exc.value.code == 2
    assert f"argument --out: {f} exists and is not a directory" in capsys.readouterr().err


def test_console_bad_argument_subprocess(tmp_path):
    # cwd outside the source tree: "python -m" puts cwd first on sys.path
    proc = subprocess.run(
        [sys.executable, "-m", "nhfast", "run", "veselova", "--lanes", "-5"],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ),
        cwd=tmp_path,
    )
    assert proc.returncode == 2
    assert "argument --lanes: expected a positive integer, got '-5'" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_cache_info_and_clear(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("NHFAST_CACHE_DIR", str(tmp_path))
    entry = tmp_path / "kdeadbeef"
    entry.mkdir()
    (entry / "lib.so").write_bytes(b"x" * 1000)
    code, out, _ = _run(["cache", "info"], capsys)
    assert code == 0 and "entries: 1 (0 generated sources, 1 compiled libraries)" in out
    assert str(tmp_path) in out
    code, out, _ = _run(["cache", "clear"], capsys)
    assert code == 0 and "removed 1 entries" in out and not entry.exists()


def test_cache_entry_that_is_a_file_stale_builds_and_foreign_files(tmp_path, monkeypatch, capsys):
    from nhfast import _jit

    monkeypatch.setenv("NHFAST_CACHE_DIR", str(tmp_path))
    entry = tmp_path / "k0123abcd"
    entry.mkdir()
    (entry / "kernel.so").write_bytes(b"x" * 500)
    (tmp_path / "kfeed.corrupt-1a2b3c4d").write_bytes(b"y" * 300)  # an entry that is a file
    old, fresh = tmp_path / ".tmp-old-1-aa", tmp_path / ".tmp-new-2-bb"
    for d in (old, fresh):
        d.mkdir()
        (d / "kernel.c").write_text("int x;")
    hours_ago = time.time() - 2 * 3600
    os.utime(old, (hours_ago, hours_ago))
    (tmp_path / "kitten.txt").write_text("not ours")  # not an entry name: left alone
    info = _jit.cache_info()
    assert (info.entries, info.size, info.builds, info.stale_builds) == (2, 800, 2, 1)
    code, out, _ = _run(["cache", "info"], capsys)
    assert code == 0 and "entries: 2" in out
    assert "build directories: 2 (1 abandoned: older than an hour or left by a process" in out
    code, out, _ = _run(["cache", "clear"], capsys)
    assert code == 0
    assert f"removed 2 entries and 1 abandoned build directories from {tmp_path}" in out
    assert sorted(p.name for p in tmp_path.iterdir()) == [".tmp-new-2-bb", "kitten.txt"]
    code, out, _ = _run(["cache", "clear"], capsys)
    assert code == 0 and "removed 0 entries from" in out


def test_cache_clear_reports_only_what_it_removed(tmp_path, monkeypatch, capsys):
    import shutil

    from nhfast import _jit

    monkeypatch.setenv("NHFAST_CACHE_DIR", str(tmp_path))
    for name in ("kaaaa", "kbbbb"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "kernel.so").write_bytes(b"x")
    real_rmtree = shutil.rmtree

    def rmtree(path, *args, **kwargs):
        if Path(path).name == "kbbbb":
            raise PermissionError(13, "Permission denied", str(path))
        real_rmtree(path, *args, **kwargs)

    monkeypatch.setattr(_jit.shutil, "rmtree", rmtree)
    code, out, err = _run(["cache", "clear"], capsys)
    assert code == 1
    assert "removed 1 entries from" in out
    assert f"cannot remove {tmp_path / 'kbbbb'}: PermissionError: Permission denied" in err
    assert [p.name for p in tmp_path.iterdir()] == ["kbbbb"]


def test_cache_dir_that_is_a_file(tmp_path, monkeypatch, capsys):
    f = tmp_path / "cache"
    f.write_text("")
    monkeypatch.setenv("NHFAST_CACHE_DIR", str(f))
    code, out, _ = _run(["cache", "info"], capsys)
    assert code == 0 and "(not a directory" in out and "entries: 0" in out
    code, out, _ = _run(["cache", "clear"], capsys)
    assert code == 0 and "removed 0 entries" in out and f.is_file()


def test_check_hamiltonisation_not_phi_simple_agrees_with_the_seed(tmp_path, capsys):
    # particle with a = 1/2: the numerical Hamiltonisation checks fail, as García-Naranjo &
    # Marrero (2020), Sec. 4.1 says they must; the report counts that agreement as PASS and keeps
    # the finding
    argv = ["check", "hamiltonisation", "particle", "--lanes", "4", "--out", str(tmp_path)]
    code, out, err = _run(argv + ["--no-plots", "--quiet"], capsys)
    assert code == 0, out + err
    data = json.loads((tmp_path / "report.json").read_text())
    numeric = [c for c in data["checks"] if "(symbolic)" not in c["name"]]
    assert numeric and all(c["holds"] is True for c in numeric)
    assert all(c["figures"]["expected"] == "fails" for c in numeric)
    cited = "fails, as expected (García-Naranjo & Marrero (2020), Sec. 4.1"
    assert all(cited in c["statement"] for c in numeric)


def test_run_that_cannot_finish_exits_1_with_one_line(tmp_path, capsys, monkeypatch):
    import nhfast.cli as cli
    from nhfast.errors import IntegrationError

    def boom(*args, **kwargs):
        raise IntegrationError("lane 3: step size underflow", np.array([0, 0, 0, 2]))

    monkeypatch.setattr(cli, "run_example", boom)
    monkeypatch.delenv("NHFAST_DEBUG", raising=False)
    code, out, err = _run(["run", "disk", "--out", str(tmp_path)], capsys)
    assert code == 1
    assert err.strip() == "nhfast: error: IntegrationError: lane 3: step size underflow"
    monkeypatch.setenv("NHFAST_DEBUG", "1")
    with pytest.raises(IntegrationError):
        main(["run", "disk", "--out", str(tmp_path)])


def test_run_veselova_pairwise_structured_subprocess(tmp_path):
    """``--inertia pairwise``: every check in its structured form, labelled, with progress lines
    on the way (cwd outside the source tree)."""
    # pairwise at n = 3 (as in tests/experiments/test_structured.py): one small library, no
    # divergence output (the measure check takes the flow-map route)
    argv = ["run", "veselova", "--n", "3", "--inertia", "pairwise", "--lanes", "8", "--t", "1"]
    proc = subprocess.run(
        [sys.executable, "-m", "nhfast", *argv, "--no-plots", "--out", "rep", "--threads", "1"],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ),
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    lines = out.splitlines()
    verdicts = [s for s in lines if s.startswith(("  PASS  ", "  FAIL  ", "  ----  "))]
    assert len(verdicts) == 6 and all(s.startswith("  PASS  ") for s in verdicts)
    # which form ran: in every check's name and in its figure "form"
    assert all("(structured numeric" in s for s in verdicts)
    form = "  form  "  # the figure column of the Figures table
    assert sum(form in s and "structured numeric (C kernels of the" in s for s in lines) == 6
    assert "Veselova rigid body on SO(3), pairwise inertia" in out
    assert any(s.startswith("inertia ") and "H_ij Om_ij" in s for s in lines)
    # progress: each stage is announced before it runs and its duration after
    for stage in (
        "building veselova (n = 3) ...",
        "integrating (dop853) ...",
        "invariant measure, structured: div(rho X) = 0 on 64 sampled states ...",
        "measure checks, structured: 2 densities along 8 trajectories ...",
        "phi-simplicity, structured:",
    ):
        assert stage in out, stage
    assert out.index("building veselova") < out.index("Verdicts:")
    assert out.count("  done in ") >= 5
    assert "Traceback" not in proc.stderr
    data = json.loads((tmp_path / "rep" / "report.json").read_text())
    assert data["settings"]["inertia"] == "pairwise"
    assert {c["figures"]["form"] for c in data["checks"]} == {FORM["structured"]}
