"""System descriptions and the example library (SymPy; the structured Veselova family also
carries its looped C program)."""

from nhfast.symbolic.liegroup import LieGroupSystem, suslov, veselova_body_so3
from nhfast.symbolic.systems import ChaplyginSystem, NonholonomicSystem, ReducedChaplyginSystem
from nhfast.systems.examples import (
    chaplygin_sleigh,
    holonomic_particle,
    nonholonomic_particle,
    vertical_rolling_disk,
    veselova,
    veselova_coordinates,
    veselova_left_trivialised,
)
from nhfast.systems.rolling_disk import (
    rolling_disk_seed002,
    rolling_disk_seed003,
    vakonomic_particle_seed003,
)
from nhfast.systems.veselova_body.forms import veselova_embedded, veselova_unreduced
from nhfast.systems.veselova_body.structured import veselova_structured
from nhfast.systems.wheeled import two_wheeled_carriage, unicycle

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
    "veselova_embedded",
    "veselova_unreduced",
    "veselova_structured",
    "rolling_disk_seed002",
    "rolling_disk_seed003",
    "vakonomic_particle_seed003",
    "LieGroupSystem",
    "suslov",
    "veselova_body_so3",
    "unicycle",
    "two_wheeled_carriage",
]
