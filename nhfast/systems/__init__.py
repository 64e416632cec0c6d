"""System descriptions and the example library (pure SymPy)."""

from nhfast.systems.examples import (
    chaplygin_sleigh,
    holonomic_particle,
    nonholonomic_particle,
    vertical_rolling_disk,
    veselova,
    veselova_coordinates,
    veselova_left_trivialised,
)
from nhfast.systems.nonholonomic import ChaplyginSystem, NonholonomicSystem, ReducedChaplyginSystem

__all__ = [
    "NonholonomicSystem",
    "ChaplyginSystem",
    "ReducedChaplyginSystem",
    "vertical_rolling_disk",
    "nonholonomic_particle",
    "holonomic_particle",
    "chaplygin_sleigh",
    "veselova",
    "veselova_left_trivialised",
    "veselova_coordinates",
]
