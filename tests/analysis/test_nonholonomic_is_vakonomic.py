"""One entry point for (Q1), "is every NH motion vakonomic?", its routes an argument.

The routes are independent computations (symbolic in coordinates, symbolic in a frame, numeric
along a batch of trajectories): where each can decide, they must agree with each other and with
seed 000's answers (the unicycle is VAK; a potential that is not invariant breaks it).
"""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp

from nhfast.analysis import nonholonomic_is_vakonomic
from nhfast.analysis.nh_vs_vak import ROUTES
from nhfast.systems.wheeled import unicycle

UNI = [1.0, 0.8, 0.2, 0.5]  # m, R, I, J
T = np.linspace(0.0, 4.0, 200)


def _x0(lanes: int) -> np.ndarray:
    return np.random.default_rng(7).uniform(-1, 1, size=(lanes, 6))


@pytest.mark.parametrize(
    ("potential", "vakonomic"),
    [(None, True), (lambda x, y, phi, th: sp.cos(phi), True), (lambda x, y, phi, th: x, False)],
    ids=["free", "invariant-potential", "x-potential"],
)
def test_routes_agree_on_the_unicycle(potential, vakonomic: bool) -> None:
    system = unicycle(potential, as_chaplygin=False)
    coords = nonholonomic_is_vakonomic(system)
    numeric = nonholonomic_is_vakonomic(
        system, "trajectories", x0=_x0(3), t_eval=T, params=UNI, tol=1e-7
    )
    assert coords.holds is vakonomic
    assert bool(numeric.holds) is vakonomic
    assert list(numeric.samples["vakonomic"]) == [vakonomic] * 3
    frame = nonholonomic_is_vakonomic(system, "frame")
    if frame.holds:  # a sufficient condition: it may only confirm
        assert vakonomic


def test_frame_and_restriction_routes_confirm_each_other() -> None:
    system = unicycle(None, as_chaplygin=False)
    frame = nonholonomic_is_vakonomic(system, "frame")
    restricted = nonholonomic_is_vakonomic(system, "restriction")
    assert frame.holds == restricted.holds


def test_bad_route_and_options_are_named() -> None:
    system = unicycle(None, as_chaplygin=False)
    with pytest.raises(ValueError, match="route must be one of"):
        nonholonomic_is_vakonomic(system, "integral")
    with pytest.raises(TypeError, match="route 'frame' takes the options"):
        nonholonomic_is_vakonomic(system, "frame", x0=[0.0] * 6)
    with pytest.raises(TypeError, match="'tol'"):
        nonholonomic_is_vakonomic(system, "coordinates", tol=1e-3)
    assert set(ROUTES) == {"coordinates", "frame", "restriction", "trajectories"}
