"""Hand-written C anchor of the physical-inertia Veselova body, built and loaded with ctypes.

``veselova_physical.c`` holds the right-hand side of the Veselova (LR) body on SO(n) with
``I(Om) = J Om + Om J`` in ``(gamma, m)`` (an ``O(n)`` Sherman-Morrison-Woodbury solve, four
passes over the index, lanes innermost), the same right-hand side behind nhfast's kernel ABI
and a C loop that calls a kernel of that ABI repeatedly (the timing harness of
``benchmarks/bench_rigid_body.py``). Built like :class:`anchors.hand_c.HandC`: the system C
compiler with nhfast's kernel flags (``-O3 -march=native``, no ``-ffast-math``).
"""

from __future__ import annotations

import ctypes
import os
import shlex
import shutil
import subprocess
import sysconfig
import tempfile
import weakref
from pathlib import Path

import numpy as np

SOURCE = Path(__file__).with_name("veselova_physical.c")

_dbl_p = ctypes.POINTER(ctypes.c_double)
_i64 = ctypes.c_int64


class _Ctx(ctypes.Structure):
    _fields_ = [("n", _i64)]


class HandPhysical:
    """The compiled hand-written physical-inertia Veselova library.

    Parameters
    ----------
    flags : sequence of str
        Optimisation flags (default: nhfast's kernel flags).
    """

    def __init__(self, flags: tuple[str, ...] = ("-O3", "-march=native", "-fno-math-errno")):
        self.build_dir = Path(tempfile.mkdtemp(prefix="nhfast-handc-physical-"))
        weakref.finalize(self, shutil.rmtree, self.build_dir, True)  # the loaded .so stays mapped
        out = self.build_dir / "libveselova_physical.so"
        cc = shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc")
        cmd = [*cc, "-std=c99", *flags, "-fPIC", "-shared", str(SOURCE), "-o", str(out), "-lm"]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(
                f"hand-written C failed to compile: {shlex.join(cmd)}\n{proc.stderr}"
            )
        self.command = cmd
        self.lib = ctypes.CDLL(str(out))
        self.lib.vp_rhs.restype = None
        self.lib.vp_rhs.argtypes = [_i64, _dbl_p, _dbl_p, _dbl_p, _i64, _i64]
        self.lib.vp_energy.restype = None
        self.lib.vp_energy.argtypes = [_i64, _dbl_p, _dbl_p, _dbl_p, _dbl_p, _i64, _i64]
        self.lib.vp_repeat_kernel.restype = _i64
        self.lib.vp_repeat_kernel.argtypes = [
            ctypes.c_void_p, ctypes.c_void_p, _dbl_p, _dbl_p, _dbl_p, _dbl_p, _i64, _i64, _i64,
        ]  # fmt: skip
        self.rhs_abi_address = ctypes.cast(self.lib.vp_rhs_abi, ctypes.c_void_p).value

    @staticmethod
    def _ptr(a: np.ndarray):
        return a.ctypes.data_as(_dbl_p)

    @staticmethod
    def _soa(x: np.ndarray, j: np.ndarray) -> tuple[int, np.ndarray, np.ndarray]:
        """Rows ``x[lanes, 2n]`` and ``j[n]`` or ``j[lanes, n]`` as SoA arrays (lanes innermost)."""
        xs = np.ascontiguousarray(np.atleast_2d(np.asarray(x, dtype=float)).T)
        lanes = xs.shape[1]
        j = np.asarray(j, dtype=float)
        n = j.shape[-1]
        if xs.shape[0] != 2 * n:
            raise ValueError(f"x must have {2 * n} columns, got {xs.shape[0]}")
        par = np.ascontiguousarray(np.broadcast_to(j, (lanes, n)).T)
        return n, xs, par

    def rhs(self, x: np.ndarray, j: np.ndarray) -> np.ndarray:
        """Right-hand side on rows ``x[lanes, 2n]`` with moments ``j`` (shared or per lane)."""
        n, xs, par = self._soa(x, j)
        f = np.empty_like(xs)
        lanes = xs.shape[1]
        self.lib.vp_rhs(n, self._ptr(par), self._ptr(xs), self._ptr(f), lanes, lanes)
        return f.T.copy()

    def energy(self, x: np.ndarray, j: np.ndarray) -> np.ndarray:
        """Kinetic energy ``1/2 m . v`` on rows ``x[lanes, 2n]``."""
        n, xs, par = self._soa(x, j)
        lanes = xs.shape[1]
        work = np.empty_like(xs)
        e = np.empty(lanes)
        self.lib.vp_energy(
            n, self._ptr(par), self._ptr(xs), self._ptr(work), self._ptr(e), lanes, lanes
        )
        return e

    def abi_context(self, n: int):
        """``(address, keep)``: the context of :func:`vp_rhs_abi` (keep ``keep`` alive)."""
        ctx = _Ctx(n)
        return ctypes.addressof(ctx), ctx

    def repeat_kernel(
        self, address: int, ctx: int | None, xs: np.ndarray, par: np.ndarray, reps: int
    ) -> np.ndarray:
        """Call the kernel at ``address`` (nhfast's ABI) ``reps`` times on SoA ``xs[N, lanes]``,
        ``par[npar, lanes]``; returns the output ``[N, lanes]``."""
        xs = np.ascontiguousarray(xs, dtype=float)
        par = np.ascontiguousarray(par, dtype=float)
        lanes = xs.shape[1]
        t = np.zeros(lanes)
        out = np.empty_like(xs)
        rc = self.lib.vp_repeat_kernel(
            address, ctx, self._ptr(t), self._ptr(xs), self._ptr(par), self._ptr(out), lanes,
            lanes, reps,
        )  # fmt: skip
        if rc != 0:
            raise RuntimeError(f"kernel returned {rc}")
        return out
