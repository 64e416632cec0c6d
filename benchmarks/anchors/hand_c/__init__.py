"""Hand-written C anchor, built with the system C compiler at benchmark time and loaded with ctypes.

``veselova_hand.c`` holds the right-hand side (``16 n + 8`` flops per lane, lanes innermost), a
fixed-step RK4 and a DOP853 with a step size per lane over blocks of 64 lanes. The DOP853
coefficients are SciPy's (``scipy.integrate._ivp.dop853_coefficients``), written to a header
in the build directory.
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

SOURCE = Path(__file__).with_name("veselova_hand.c")
FLOPS_PER_RHS = (16, 8)  # 16 n + 8 per lane

_dbl_p = ctypes.POINTER(ctypes.c_double)
_i64 = ctypes.c_int64


def _table_header() -> str:
    from scipy.integrate._ivp import dop853_coefficients as d

    s = d.N_STAGES

    def arr(name: str, v: np.ndarray) -> str:
        return f"static const double {name}[{v.size}] = {{{', '.join(repr(float(x)) for x in v)}}};"

    rows = ",\n  ".join("{" + ", ".join(repr(float(x)) for x in d.A[i, :s]) + "}" for i in range(s))
    return "\n".join(
        [
            "/* DOP853 coefficients (Hairer), from scipy.integrate._ivp.dop853_coefficients. */",
            f"#define VS_S {s}",
            f"static const double VS_A[{s}][{s}] = {{\n  {rows}}};",
            arr("VS_B", d.B[:s].astype(float)),
            arr("VS_C", d.C[:s].astype(float)),
            arr("VS_E3", d.E3.astype(float)),
            arr("VS_E5", d.E5.astype(float)),
            "",
        ]
    )


def _compiler() -> list[str]:
    cc = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    return shlex.split(cc)


class HandC:
    """The compiled hand-written library.

    Parameters
    ----------
    flags : sequence of str
        Optimisation flags (the defaults match nhfast's kernel flags: ``-O3 -march=native``,
        no ``-ffast-math``).
    """

    def __init__(self, flags: tuple[str, ...] = ("-O3", "-march=native", "-fno-math-errno")):
        self.build_dir = Path(tempfile.mkdtemp(prefix="nhfast-handc-"))
        weakref.finalize(self, shutil.rmtree, self.build_dir, True)  # the loaded .so stays mapped
        (self.build_dir / "dop853_tab.h").write_text(_table_header())
        out = self.build_dir / "libveselova_hand.so"
        cmd = [
            *_compiler(),
            "-std=c99",
            *flags,
            "-fPIC",
            "-shared",
            f"-I{self.build_dir}",
            str(SOURCE),
            "-o",
            str(out),
            "-lm",
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(
                f"hand-written C failed to compile: {shlex.join(cmd)}\n{proc.stderr}"
            )
        self.command = cmd
        self.lib = ctypes.CDLL(str(out))
        self.lib.vs_rk4.restype = _i64
        self.lib.vs_rk4.argtypes = [_i64, _dbl_p, _i64, _dbl_p, ctypes.c_double, _i64, _dbl_p]
        self.lib.vs_dop853.restype = _i64
        self.lib.vs_dop853.argtypes = [
            _i64, _dbl_p, _i64, _dbl_p, ctypes.c_double, ctypes.c_double, ctypes.c_double,
            _i64, _dbl_p,
        ]  # fmt: skip
        self.lib.vs_rhs.restype = None
        self.lib.vs_rhs.argtypes = [_i64, _dbl_p, _dbl_p, _dbl_p, _dbl_p, _i64, _i64]
        self.lib.vs_repeat_kernel.restype = _i64
        self.lib.vs_repeat_kernel.argtypes = [
            ctypes.c_void_p, ctypes.c_void_p, _dbl_p, _dbl_p, _dbl_p, _dbl_p, _i64, _i64, _i64,
        ]  # fmt: skip
        self.rhs_abi_address = ctypes.cast(self.lib.vs_rhs_abi, ctypes.c_void_p).value

    @staticmethod
    def _ptr(a: np.ndarray):
        return a.ctypes.data_as(_dbl_p)

    def rhs(self, x: np.ndarray, a: np.ndarray) -> np.ndarray:
        """Right-hand side on rows ``x[lanes, 2n]`` (converted to lanes innermost and back)."""
        a = np.ascontiguousarray(a, dtype=float)
        n = a.size
        xs = np.ascontiguousarray(np.atleast_2d(x).T, dtype=float)
        if xs.shape[0] != 2 * n:
            raise ValueError(f"x must have {2 * n} columns, got {xs.shape[0]}")
        f = np.empty_like(xs)
        ia = 1.0 / a
        lanes = xs.shape[1]
        self.lib.vs_rhs(n, self._ptr(a), self._ptr(ia), self._ptr(xs), self._ptr(f), lanes, lanes)
        return f.T.copy()

    def rk4(self, x0: np.ndarray, a: np.ndarray, h: float, nsteps: int) -> tuple[np.ndarray, int]:
        """``nsteps`` RK4 steps of size ``h``: (final states ``[lanes, 2n]``, lane-evaluations)."""
        a = np.ascontiguousarray(a, dtype=float)
        x0 = np.ascontiguousarray(x0, dtype=float)
        y = np.empty_like(x0)
        ev = self.lib.vs_rk4(
            a.size, self._ptr(a), x0.shape[0], self._ptr(x0), h, nsteps, self._ptr(y)
        )
        if ev < 0:
            raise MemoryError("hand-written RK4: out of memory")
        return y, int(ev)

    def dop853(
        self,
        x0: np.ndarray,
        a: np.ndarray,
        t_end: float,
        rtol: float,
        atol: float,
        max_steps: int = 1_000_000,
    ) -> tuple[np.ndarray, int]:
        """DOP853 from 0 to ``t_end``: (final states ``[lanes, 2n]``, lane-evaluations)."""
        a = np.ascontiguousarray(a, dtype=float)
        x0 = np.ascontiguousarray(x0, dtype=float)
        y = np.empty_like(x0)
        ev = self.lib.vs_dop853(
            a.size, self._ptr(a), x0.shape[0], self._ptr(x0), t_end, rtol, atol, max_steps,
            self._ptr(y),
        )  # fmt: skip
        if ev == -1:
            raise MemoryError("hand-written DOP853: out of memory")
        if ev == -2:
            raise RuntimeError("hand-written DOP853: a lane used up max_steps or underflowed")
        return y, int(ev)

    def repeat_kernel(
        self, address: int, ctx: int | None, xs: np.ndarray, par: np.ndarray, reps: int
    ) -> np.ndarray:
        """Call the kernel at ``address`` (nhfast's ABI) ``reps`` times on SoA ``xs[n, lanes]``,
        ``par[npar, lanes]``; returns the output ``[n, lanes]``."""
        xs = np.ascontiguousarray(xs, dtype=float)
        par = np.ascontiguousarray(par, dtype=float)
        lanes = xs.shape[1]
        t = np.zeros(lanes)
        out = np.empty_like(xs)
        rc = self.lib.vs_repeat_kernel(
            address, ctx, self._ptr(t), self._ptr(xs), self._ptr(par), self._ptr(out), lanes,
            lanes, reps,
        )  # fmt: skip
        if rc != 0:
            raise RuntimeError(f"kernel returned {rc}")
        return out

    def abi_context(self, a: np.ndarray):
        """A ``vs_ctx`` for :func:`vs_rhs_abi` (keep the returned tuple alive while used)."""

        class Ctx(ctypes.Structure):
            _fields_ = [("n", _i64), ("a", _dbl_p), ("ia", _dbl_p)]

        a = np.ascontiguousarray(a, dtype=float)
        ia = 1.0 / a
        ctx = Ctx(a.size, self._ptr(a), self._ptr(ia))
        return ctypes.addressof(ctx), (ctx, a, ia)
