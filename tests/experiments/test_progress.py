"""The progress bar of long runs: drawn only when enabled, bad totals refused."""

from __future__ import annotations

import io
import time

import pytest

from nhfast._progress import Heartbeat, Progress


def test_progress_draws_only_when_enabled():
    buf = io.StringIO()
    with Progress(3, "work", stream=buf, enabled=True, min_interval=0.0) as bar:
        for _ in range(3):
            bar.update()
    text = buf.getvalue()
    assert "work [" in text and "3/3" in text and text.endswith("\n")
    quiet = io.StringIO()  # not a terminal: disabled by default
    with Progress(3, stream=quiet) as bar:
        bar.update(5)
    assert quiet.getvalue() == "" and bar.done == 3
    assert "#" * 30 in bar.line()


@pytest.mark.parametrize("total", [0, -1, 1.5, True])
def test_progress_bad_total(total):
    with pytest.raises(ValueError, match="total must be an int >= 1"):
        Progress(total)


def test_heartbeat_says_a_long_stage_is_running_and_stops():
    lines = []
    with Heartbeat(lines.append, "deriving", interval=0.05) as beat:
        time.sleep(0.3)
    count = len(lines)
    assert count >= 2 and beat.beats == count
    assert lines[0].startswith("  ... deriving: still running, ")
    time.sleep(0.15)
    assert len(lines) == count  # closed: no more lines
    quick = []
    with Heartbeat(quick.append, "fast", interval=5.0):
        pass
    assert quick == []
    with pytest.raises(ValueError, match="interval must be > 0"):
        Heartbeat(quick.append, "bad", interval=0.0)
