"""Every exception and warning of nhfast (one module, so that callers catch them by one import)."""

from __future__ import annotations

import numpy as np


class CompilationError(RuntimeError):
    """The C compiler failed on generated code.

    Attributes
    ----------
    command : list of str
        The full compiler command.
    stderr : str
        What the compiler wrote to standard error.
    """

    def __init__(self, command: list[str], stderr: str, returncode: int | None = None) -> None:
        self.command = list(command)
        self.stderr = stderr
        self.returncode = returncode
        super().__init__(
            f"compilation failed (exit code {returncode}): {' '.join(command)}\n{stderr.strip()}"
        )


class IntegrationError(RuntimeError):
    """Some trajectories failed; ``status`` holds the per-lane codes (0 = ok).

    Attributes
    ----------
    status : numpy.ndarray of int32
        Per-trajectory status codes, see ``nhfast.STATUS``.
    result : IntegrationResult
        The partial result (rows after a failure are NaN).
    """

    def __init__(self, message: str, status: np.ndarray, result=None) -> None:
        self.status = status
        self.result = result
        super().__init__(message)


class IntegrationWarning(RuntimeWarning):
    """Some trajectories failed and the caller asked to keep the others."""


class CacheWarning(RuntimeWarning):
    """The kernel cache directory is not usable; a private temporary cache is used instead."""


class BackendWarning(RuntimeWarning):
    """nhfast fell back to the slow NumPy backend (no C compiler)."""


class ConstraintAlgorithmError(ValueError):
    """The constraint algorithm degenerates: no stop within ``max_steps``, an empty
    (inconsistent) final set, or a singular matrix where the theory needs it invertible."""


class HolonomicConstraintsWarning(UserWarning):
    """The constraints are integrable: nonholonomic and vakonomic motions coincide."""


class UsageError(ValueError):
    """An argument of an experiment does not fit the example (the command exits with 2)."""


class SystemSpecError(UsageError):
    """A user's system for ``nhfast run FILE.py:FACTORY`` cannot be loaded or does not fit:
    missing file or factory, a factory that raises, a value of the wrong type, parameters
    without values (the command exits with 2)."""


class ToleranceWarning(UserWarning):
    """A tolerance below what double precision can deliver was raised to the smallest one
    that means something."""


class InsufficientMemoryError(MemoryError):
    """An allocation that the arguments ask for exceeds the memory available (estimated
    before allocating: the message gives both sizes)."""


class DamagedStoreError(ValueError):
    """A chunk of an ensemble store does not match its checksum (deleted, truncated or
    overwritten): the message names the store, the array and the trajectories."""
