"""Constructors of the example catalogue: options and arguments (nhfast.systems.examples)."""

from __future__ import annotations

import pytest
import sympy as sp

from nhfast.symbolic._util import matrix_is_zero
from nhfast.systems import chaplygin_sleigh


def test_sleigh_blade_frame_spans_d_globally() -> None:
    plain = chaplygin_sleigh(as_chaplygin=False)
    blade = chaplygin_sleigh(as_chaplygin=False, blade_frame=True)
    th = blade.q[2]
    assert blade.frame == sp.Matrix([[sp.cos(th), 0], [sp.sin(th), 0], [0, 1]])
    assert matrix_is_zero(blade.constraint_forms * blade.frame)
    assert blade.metric == plain.metric and blade.params == plain.params
    assert plain.frame[1, 0] == sp.tan(th)  # the frame from the 1-form is singular at pi/2
    with pytest.raises(ValueError, match="blade_frame"):
        chaplygin_sleigh(blade_frame=True)


def test_with_frame_refuses_a_foreign_or_dependent_frame() -> None:
    from nhfast.systems._common import with_frame

    sleigh = chaplygin_sleigh(as_chaplygin=False)
    th = sleigh.q[2]
    with pytest.raises(ValueError, match="not annihilated"):
        with_frame(sleigh, sp.Matrix([[1, 0], [0, 0], [0, 1]]))
    dependent = sp.Matrix([[sp.cos(th), 2 * sp.cos(th)], [sp.sin(th), 2 * sp.sin(th)], [0, 0]])
    with pytest.raises(ValueError, match="not independent"):
        with_frame(sleigh, dependent)
