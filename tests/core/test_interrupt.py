"""Runs are interruptible: Ctrl-C stops a long integration within a fraction of a second.

The compiled core lets the calling (main) thread run the Python signal handlers every
``_core.POLL_SECONDS`` while the threads work; a handler that raises stops every thread after
its current step, and the exception propagates once they have all left. A handler that does
not raise changes nothing: the run goes on and gives the same bits.
"""

from __future__ import annotations

import _thread
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import nhfast as nh

posix_only = pytest.mark.skipif(sys.platform == "win32", reason="sends POSIX signals")

#: Integrates for hours unless interrupted; prints "started" once the kernels are compiled,
#: and the wall-clock time at which KeyboardInterrupt arrived.
CHILD = textwrap.dedent(
    """
    import signal, sys, time
    import numpy as np, sympy as sp
    import nhfast as nh

    signal.signal(signal.SIGINT, signal.default_int_handler)  # even if the parent ignores it
    method, threads = sys.argv[1], int(sys.argv[2])
    q, p = sp.symbols("q p")
    ham = nh.HamiltonianSystem([q], [p], p**2 / 2 - sp.cos(q), name="pendulum")
    x0 = np.column_stack([np.linspace(0.1, 1.0, 256), np.zeros(256)])
    nh.integrate(ham, x0[:2], [0.0, 0.1], method=method, h=0.01)  # compile first
    print("started", flush=True)
    try:
        nh.integrate(ham, x0, [0.0, 1e7], method=method, h=1e-3, rtol=1e-12, atol=1e-12,
                     max_steps=10**15, threads=threads, block=64)
    except KeyboardInterrupt:
        print(f"interrupted at {time.time():.6f}", flush=True)
        raise
    print("finished", flush=True)
    """
)


@posix_only
@pytest.mark.parametrize(
    "method,threads,backend",
    [
        ("rk4", 1, "c"),
        ("rk4", 2, "c"),
        ("dop853", 2, "c"),
        ("gauss4", 1, "c"),
        ("dopri5", 1, "numpy"),
    ],
)
def test_sigint_stops_a_long_run(tmp_path, method, threads, backend):
    """In a child process: SIGINT once the run is under way; KeyboardInterrupt within 2 s."""
    script = tmp_path / "long_run.py"
    script.write_text(CHILD)
    proc = subprocess.Popen(
        [sys.executable, str(script), method, str(threads)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, NHFAST_BACKEND=backend),
    )
    try:
        assert proc.stdout.readline().strip() == "started", proc.stderr.read()
        time.sleep(0.5)  # well inside the compiled core
        sent = time.time()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    exited = time.time() - sent
    assert "KeyboardInterrupt" in err, err
    assert "finished" not in out
    stopped = float(out.split("interrupted at")[1]) - sent
    assert stopped < 2.0, f"the run stopped {stopped:.2f} s after SIGINT"
    assert exited < 10.0  # interpreter teardown included
    assert proc.returncode != 0


def _long_run(kepler, threads):
    x0 = np.tile([1.0, 0.0, 0.0, 1.0], (128, 1))
    return nh.integrate(
        kepler, x0, [0.0, 1e6], method="rk4", h=1e-3, max_steps=10**10, threads=threads
    )


@posix_only
@pytest.mark.parametrize("threads", [1, 2])
def test_interrupt_in_process_leaves_the_core_usable(kepler, threads):
    """KeyboardInterrupt propagates from the call; no thread is left behind and the next
    run gives the same bits as before."""
    x0 = np.tile([1.0, 0.0, 0.0, 1.0], (16, 1))
    before = nh.integrate(kepler, x0, [0.0, 1.0], method="dop853", threads=threads)
    nthreads = threading.active_count()
    # interrupt_main does nothing while SIGINT is ignored (a test run in the background)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(0.3, _thread.interrupt_main)
    t0 = time.monotonic()
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            _long_run(kepler, threads)
    finally:
        timer.cancel()
        timer.join()
        signal.signal(signal.SIGINT, previous)
    assert time.monotonic() - t0 < 2.0
    assert threading.active_count() == nthreads
    after = nh.integrate(kepler, x0, [0.0, 1.0], method="dop853", threads=threads)
    assert np.array_equal(after.y, before.y)


@posix_only
def test_a_handler_that_does_not_raise_changes_nothing(kepler):
    """A signal whose Python handler returns normally is handled during the run (by the
    calling thread's checks), which goes on to the same bits."""
    x0 = np.tile([1.0, 0.0, 0.0, 1.0], (64, 1)) + 0.01 * np.arange(64)[:, None]
    t = [0.0, 50.0]
    ref = nh.integrate(kepler, x0, t, method="rk4", h=1e-3, threads=2)
    seen: list[float] = []
    previous = signal.signal(signal.SIGUSR1, lambda signum, frame: seen.append(time.monotonic()))
    timer = threading.Timer(0.05, os.kill, (os.getpid(), signal.SIGUSR1))
    try:
        timer.start()
        res = nh.integrate(kepler, x0, t, method="rk4", h=1e-3, threads=2)
        returned = time.monotonic()
    finally:
        timer.cancel()
        timer.join()
        signal.signal(signal.SIGUSR1, previous)
    assert len(seen) == 1 and seen[0] < returned  # handled inside the compiled call
    assert np.array_equal(res.y, ref.y)
