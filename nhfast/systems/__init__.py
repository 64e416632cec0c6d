"""The example catalogue: wheeled systems, particles, the sleigh, the Chaplygin ball, Heisenberg,
Suslov, Veselova.

The system classes are defined in :mod:`nhfast.symbolic` and re-exported here.
"""

from nhfast.symbolic.liegroup import LieGroupSystem
from nhfast.symbolic.systems import ChaplyginSystem, NonholonomicSystem, ReducedChaplyginSystem
from nhfast.systems.examples import (
    chaplygin_ball,
    chaplygin_ball_density,  # noqa: F401
    chaplygin_sleigh,
    holonomic_particle,
    nonholonomic_particle,
    two_constraint_system,
    vertical_rolling_disk,
)
from nhfast.systems.inertia import INERTIAS  # noqa: F401
from nhfast.systems.rigid_bodies import rigid_body, rigid_body_params, suslov_rigid_body
from nhfast.systems.rigid_body_maps import (
    angular_velocity,
    momentum_of_velocity,
    velocity_of_momentum,
)
from nhfast.systems.rolling_disk import contact_particle
from nhfast.systems.suslov_problem import suslov
from nhfast.systems.veselova_body import veselova
from nhfast.systems.wheeled import two_wheeled_carriage, unicycle

__all__ = [
    "NonholonomicSystem",
    "ChaplyginSystem",
    "ReducedChaplyginSystem",
    "vertical_rolling_disk",
    "nonholonomic_particle",
    "two_constraint_system",
    "holonomic_particle",
    "chaplygin_sleigh",
    "chaplygin_ball",
    "veselova",
    "rigid_body",
    "suslov_rigid_body",
    "rigid_body_params",
    "momentum_of_velocity",
    "velocity_of_momentum",
    "angular_velocity",
    "contact_particle",
    "LieGroupSystem",
    "suslov",
    "unicycle",
    "two_wheeled_carriage",
]
