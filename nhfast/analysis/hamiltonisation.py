"""Hamiltonisation checks for Chaplygin systems (García-Naranjo and Marrero 2020, Sec. 3.4-3.5).

García-Naranjo & Marrero (2020), "The geometry of nonholonomic Chaplygin systems revisited".

Every check returns a :class:`nhfast.analysis.result.Check`:

* :func:`phi_simplicity` -- symbolic: ``C^k_ij = delta^k_i d_j phi - delta^k_j d_i phi``
  (Definition 3.19), via :func:`nhfast.symbolic.chaplygin.phi_simple`;
* :func:`fit_phi_gradient` / :func:`phi_simplicity_on_samples` -- numeric: ``C`` evaluated at
  sample points of ``S``, ``d phi`` fitted by least squares at each point, residual of the
  phi-simple form, and closedness of the fitted ``d phi`` (central differences);
* :func:`conformal_closedness` -- ``d(exp(phi) Omega_nh) = 0`` (Theorem 3.21(i)) on sample points
  ``(s, p)``, with ``Omega_nh = ds^i ^ dp_i + sum_{i<j} C^k_ij p_k ds^i ^ ds^j`` (3.12);
* :func:`hamiltonised_flow_checks` -- the Hamiltonised system integrated in ``tau`` with a
  Gauss-Legendre scheme: conservation of ``Htilde``, symplecticity ``M^T J M = J`` of the
  ``tau``-flow, and agreement of its orbits, mapped back by ``dt = exp(-phi) dtau`` and
  ``p = exp(-phi) ptilde``, with DOP853 on the original reduced system at tight tolerance;
* :func:`hamiltonisation_report` -- all of the above as a :class:`~nhfast.analysis.result.Report`
  whose last check is the verdict, and :func:`summary`, a plain-text digest.

Matrix convention for 2-forms: ``Omega = 1/2 W_ab dx^a ^ dx^b`` on ``x = (s, p)``,
``W = [[Cp, I], [-I, 0]]`` with ``(Cp)_ij = C^k_ij p_k``; the exterior derivative is
``(d Omega)_abc = d_a W_bc + d_b W_ca + d_c W_ab``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import sympy as sp

from nhfast._validate import params_rows, real_array
from nhfast._validate import positive as _positive
from nhfast.analysis.result import Check, Report
from nhfast.codegen.numpy_backend import numpy_rows
from nhfast.hamiltonised import GAUSS_METHODS
from nhfast.integrate import integrate
from nhfast.symbolic.chaplygin import reduced_system
from nhfast.symbolic.time_change import time_changed_system
from nhfast.vectorfield import VectorField

__all__ = [
    "phi_simplicity",
    "conformal_closedness",
    "hamiltonisation_report",
]


# ------------------------------------------------------------------------------ helpers ----


def _finite_array(value: Any, name: str, ndim: int, last: int | None = None) -> np.ndarray:
    """A finite real array of ``ndim`` dimensions (one less: a single row), ``last`` columns."""
    a = real_array(value, name)
    if a.ndim == ndim - 1:
        a = a[None]
    if a.ndim != ndim or (last is not None and a.shape[-1] != last):
        want = f"(m, {last})" if ndim == 2 else f"{ndim} dimensions"
        raise ValueError(f"{name} must have shape {want}, got {a.shape}")
    return a


# ------------------------------------------------------------------- phi-simplicity ----


def phi_simplicity(system: Any, simplify: bool = False) -> Check:
    """Symbolic phi-simplicity test (García-Naranjo and Marrero 2020, Def. 3.19, Thm. 3.21).

    Parameters
    ----------
    system : ChaplyginSystem or ReducedChaplyginSystem
    simplify : bool
        Simplify intermediate expressions (zero tests are exact either way; ``phi`` is
        simplified for display).

    Returns
    -------
    Check
        ``holds`` is True with ``figures["phi"]`` when the system is phi-simple; figures also
        give ``r``, whether the gyroscopic tensor vanishes (then ``phi = 0`` and the reduced
        system is Hamiltonian as is) and the reason when it is not phi-simple.
    """
    from nhfast.symbolic.chaplygin import gyroscopic_tensor_vanishes, phi_simple

    red = reduced_system(system)
    r = red.rank
    zero = gyroscopic_tensor_vanishes(red.C)
    figures: dict[str, Any] = {"r": r, "gyroscopic tensor T = 0": zero}
    name = "phi-simplicity C^k_ij = delta^k_i d_j phi - delta^k_j d_i phi (symbolic)"
    if r < 2:
        return Check(
            name,
            None,
            f"not applicable: r = {r} < 2 (the gyroscopic tensor is trivially zero)",
            figures,
        )
    res = phi_simple(red, simplify=simplify)
    if not res.is_phi_simple:
        figures["reason"] = res.reason
        if res.gradient is not None:
            figures["candidate d phi = (C^i_ij)_j"] = [str(g) for g in res.gradient]
        stmt = res.reason if res.reason.startswith("not") else f"not phi-simple: {res.reason}"
        return Check(name, False, stmt, figures)
    phi = sp.simplify(res.phi)
    figures["phi"] = str(phi)
    figures["dt/dtau = exp(-phi)"] = str(sp.simplify(sp.exp(-phi)))
    if zero:
        return Check(
            name,
            True,
            "phi-simple with phi = 0: T = 0, Omega_nh = Omega_can, Hamiltonian as is",
            figures,
        )
    return Check(name, True, f"phi-simple with phi = {phi}", figures)


def gyroscopic_function(system: Any) -> Callable[[np.ndarray, Any], np.ndarray]:
    """Numeric ``C(s, params) -> (m, r, r, r)`` with ``C[:, i, j, k] = C^k_ij`` at rows ``s``.

    Parameters
    ----------
    system : ChaplyginSystem or ReducedChaplyginSystem

    Returns
    -------
    callable
        ``f(s, params=None)``, ``s`` of shape ``(m, r)``, ``params`` of shape
        ``(n_params,)`` or ``(m, n_params)``.
    """
    red = reduced_system(system)
    r = red.rank
    rows = numpy_rows([*red.s, *red.params], list(sp.flatten(red.C)))

    def C(s: Any, params: Any = None) -> np.ndarray:
        s = _finite_array(s, "s", 2, r)
        par = params_rows(params, red.params, s.shape[0], full=True)
        return rows(np.hstack([s, par])).reshape(s.shape[0], r, r, r)

    return C


def _phi_simple_matrix(r: int) -> np.ndarray:
    """``A`` with ``(A g)[(i, j, k)] = delta_ki g_j - delta_kj g_i`` (rows flattened i, j, k)."""
    A = np.zeros((r, r, r, r))
    for i, j in itertools.product(range(r), repeat=2):
        A[i, j, i, j] += 1.0
        A[i, j, j, i] -= 1.0
    return A.reshape(r**3, r)


def fit_phi_gradient(C: Any) -> tuple[np.ndarray, np.ndarray]:
    """Least-squares ``d phi`` from gyroscopic coefficients at sample points.

    Parameters
    ----------
    C : array_like, shape (m, r, r, r)
        ``C[:, i, j, k] = C^k_ij`` at ``m`` points.

    Returns
    -------
    gradient : ndarray, shape (m, r)
        The ``g`` minimising ``sum |C^k_ij - (delta^k_i g_j - delta^k_j g_i)|^2`` per point.
    residual : ndarray, shape (m,)
        ``max_ijk |C^k_ij - (delta^k_i g_j - delta^k_j g_i)|`` per point (0 iff the
        phi-simple form holds there).
    """
    C = _finite_array(C, "C", 4)
    m, r = C.shape[0], C.shape[1]
    if C.shape[1:] != (r, r, r) or r < 2:
        raise ValueError(f"C must have shape (m, r, r, r) with r >= 2, got {C.shape}")
    A = _phi_simple_matrix(r)
    flat = C.reshape(m, r**3)
    g = np.linalg.lstsq(A, flat.T, rcond=None)[0].T
    resid = np.max(np.abs(flat - g @ A.T), axis=1)
    return g, resid


def phi_simplicity_on_samples(
    gyroscopic: Callable[..., np.ndarray],
    s: Any,
    params: Any = None,
    h: float = 1e-5,
    form_tol: float = 1e-10,
    closed_tol: float = 1e-6,
) -> Check:
    """Numeric phi-simplicity for a system known through ``C^k_ij`` at points only.

    At each sample ``s`` the gradient ``g = d phi`` is fitted by least squares
    (:func:`fit_phi_gradient`); the residual of the phi-simple form measures (H) and the
    Theorem 3.21 identity; the closedness ``d_l g_j - d_j g_l`` of the fitted gradient is taken by
    central differences with step ``h`` (a phi exists locally iff it vanishes).

    Parameters
    ----------
    gyroscopic : callable
        ``gyroscopic(s, params) -> (m, r, r, r)``, e.g. :func:`gyroscopic_function`.
    s : array_like, shape (m, r)
        Sample points of the shape space.
    params : array_like, optional
    h : float
        Difference step for the closedness.
    form_tol, closed_tol : float
        Thresholds, relative to ``1 + max |C|`` and ``1 + max |d g|`` (scale of the
        derivatives, also by differences).

    Returns
    -------
    Check
        ``samples``: per-point form residual and closedness residual; figures: maxima.
    """
    if not callable(gyroscopic):
        raise TypeError(f"gyroscopic must be callable (s, params) -> C, got {gyroscopic!r}")
    s = _finite_array(s, "s", 2)
    h = _positive(h, "h")
    form_tol = _positive(form_tol, "form_tol")
    closed_tol = _positive(closed_tol, "closed_tol")
    m, r = s.shape
    C = np.asarray(gyroscopic(s, params), dtype=float)
    if C.shape != (m, r, r, r):
        raise ValueError(f"gyroscopic returned shape {C.shape}, expected {(m, r, r, r)}")
    g, resid = fit_phi_gradient(C)
    dg = np.zeros((m, r, r))  # dg[:, l, j] = d_l g_j
    for l_ in range(r):
        e = np.zeros(r)
        e[l_] = h
        gp, _ = fit_phi_gradient(gyroscopic(s + e, params))
        gm, _ = fit_phi_gradient(gyroscopic(s - e, params))
        dg[:, l_, :] = (gp - gm) / (2 * h)
    curl = np.max(np.abs(dg - np.transpose(dg, (0, 2, 1))), axis=(1, 2))
    c_scale = 1.0 + float(np.max(np.abs(C)))
    d_scale = 1.0 + float(np.max(np.abs(dg)))
    form_max, curl_max = float(np.max(resid)), float(np.max(curl))
    form_ok = form_max <= form_tol * c_scale
    closed_ok = curl_max <= closed_tol * d_scale
    figures = {
        "r": r,
        "sample points": m,
        "max phi-simple form residual": form_max,
        "max |C|": c_scale - 1.0,
        "max closedness residual |d_l g_j - d_j g_l|": curl_max,
        "max |d g|": d_scale - 1.0,
        "difference step": h,
        "form threshold (relative)": form_tol,
        "closedness threshold (relative)": closed_tol,
    }
    samples = {"phi-simple form residual": resid, "closedness residual": curl}
    name = "phi-simplicity fitted on samples (least squares d phi, closedness by differences)"
    if form_ok and closed_ok:
        stmt = (
            f"phi-simple on the samples: form residual {form_max:.1e}, closedness "
            f"residual {curl_max:.1e}"
        )
        return Check(name, True, stmt, figures, samples=samples)
    why = []
    if not form_ok:
        why.append(f"C is not of the phi-simple form (residual {form_max:.2e})")
    if not closed_ok:
        why.append(f"the fitted d phi is not closed (residual {curl_max:.2e})")
    return Check(name, False, "not phi-simple: " + "; ".join(why), figures, samples=samples)


# --------------------------------------------------------- closedness of exp(phi) Omega ----


def _omega_nh(C: Any, s: Sequence[sp.Symbol], p: Sequence[sp.Symbol]) -> sp.Matrix:
    r = len(s)
    W = sp.zeros(2 * r, 2 * r)
    for i in range(r):
        W[i, r + i] = 1
        W[r + i, i] = -1
        for j in range(r):
            W[i, j] = sum((C[i, j, k] * p[k] for k in range(r)), sp.Integer(0))
    return W


def _d_two_form(
    W: sp.Matrix, x: Sequence[sp.Symbol], g: Sequence[sp.Expr] | None = None
) -> list[sp.Expr]:
    """Components ``a < b < c`` of ``dOmega`` (or of ``g ^ Omega + d Omega`` when ``g`` given)."""
    out = []
    n = len(x)
    for a, b, c in itertools.combinations(range(n), 3):
        e = sp.diff(W[b, c], x[a]) + sp.diff(W[c, a], x[b]) + sp.diff(W[a, b], x[c])
        if g is not None:
            e += g[a] * W[b, c] + g[b] * W[c, a] + g[c] * W[a, b]
        out.append(e)
    return out


def conformal_closedness(system: Any, x: Any, params: Any = None, tol: float = 1e-10) -> Check:
    """``d(exp(phi) Omega_nh) = 0`` on sample points (ibid., Theorem 3.21(i), Lemma 3.24).

    ``exp(-phi) d(exp(phi) Omega_nh) = d phi ^ Omega_nh + d Omega_nh`` needs only ``d phi``; the
    candidate ``d_j phi = C^i_ij`` (``i != j``) is the only possible one (a closed
    ``exp(phi) Omega_nh`` forces phi-simplicity, Theorem 3.21(i)), so the check decides
    whether *any* conformal factor closes ``Omega_nh``.  The candidate must also be closed
    (``d(d phi) = 0``) for ``phi`` to exist: for ``r = 2`` the pointwise identity
    ``g ^ Omega_nh + d Omega_nh = 0`` holds for every skew ``C`` with ``g = (C^i_ij)_j``, and
    only this closedness decides (Corollary 3.25).  The components are formed symbolically and
    evaluated at the samples.

    Parameters
    ----------
    system : ChaplyginSystem or ReducedChaplyginSystem
    x : array_like, shape (m, 2 r)
        Sample points ``(s, p)``.
    params : array_like, optional
    tol : float
        Threshold on ``max |d(exp(phi) Omega_nh)| exp(-phi)`` relative to
        ``1 + max |d Omega_nh|``.

    Returns
    -------
    Check
        Figures: the maxima of the conformal residual and of ``d Omega_nh`` (control: zero
        only when ``T = 0``); samples: per-point residuals.
    """
    red = reduced_system(system)
    r = red.rank
    x = _finite_array(x, "x", 2, 2 * r)
    tol = _positive(tol, "tol")
    name = "closedness d(exp(phi) Omega_nh) = 0 on samples"
    if r < 2:
        return Check(name, None, f"not applicable: r = {r} < 2", {"r": r})
    par = params_rows(params, red.params, x.shape[0], full=True)
    p = [sp.Dummy(f"p{i}") for i in range(r)]
    coords = [*red.s, *p]
    W = _omega_nh(red.C, red.s, p)
    grad = [red.C[1 if j == 0 else 0, j, 1 if j == 0 else 0] for j in range(r)]
    g = [*grad, *([sp.Integer(0)] * r)]
    d_omega = _d_two_form(W, coords)
    conf = _d_two_form(W, coords, g)
    curl = [sp.diff(grad[j], red.s[i]) - sp.diff(grad[i], red.s[j]) for i, j in
            itertools.combinations(range(r), 2)]  # fmt: skip
    f = numpy_rows([*coords, *red.params], [*conf, *d_omega, *curl])
    vals = np.abs(f(np.hstack([x, par])))
    nc, nd = len(conf), len(d_omega)
    res_c = np.max(vals[:, :nc], axis=1)
    res_d = np.max(vals[:, nc : nc + nd], axis=1)
    res_g = np.max(vals[:, nc + nd :], axis=1)
    scale = 1.0 + float(np.max(res_d))
    worst = float(np.max(res_c))
    worst_g = float(np.max(res_g))
    pointwise = worst <= tol * scale
    exact = worst_g <= tol * scale
    holds = pointwise and exact
    figures = {
        "r": r,
        "sample points": int(x.shape[0]),
        "max |exp(-phi) d(exp(phi) Omega_nh)|": worst,
        "max |d Omega_nh| (control)": scale - 1.0,
        "max |d(d phi)| (candidate d phi closed?)": worst_g,
        "threshold (relative)": tol,
        "d phi used": [str(e) for e in grad],
    }
    samples = {"conformal residual": res_c, "d Omega_nh": res_d, "d(d phi)": res_g}
    if pointwise and not exact:
        stmt = (
            f"not closed for any phi: d phi ^ Omega_nh + d Omega_nh = 0 holds pointwise "
            f"(residual {worst:.1e}) with the candidate d phi = (C^i_ij)_j, but that 1-form is "
            f"not closed (max |d(d phi)| = {worst_g:.2e}), so no phi exists"
        )
    elif holds:
        stmt = f"exp(phi) Omega_nh is closed on the samples (max residual {worst:.1e})"
        if scale - 1.0 <= tol:
            stmt += "; Omega_nh itself is closed (T = 0)"
    else:
        stmt = (
            f"not closed: max |exp(-phi) d(exp(phi) Omega_nh)| = {worst:.2e} with the only "
            "candidate d phi = (C^i_ij)_j, so no conformal factor closes Omega_nh"
        )
    return Check(name, holds, stmt, figures, samples=samples)


# ----------------------------------------------------------------- trajectory checks ----


def _omega_J(r: int) -> np.ndarray:
    return np.block([[np.zeros((r, r)), np.eye(r)], [-np.eye(r), np.zeros((r, r))]])


def _flow_jacobian_fd(
    vf: VectorField, z0: np.ndarray, grid: np.ndarray, par: np.ndarray, eps: float, **kw: Any
) -> np.ndarray:
    """Central-difference Jacobian of the flow map at every grid time: (L, n_t, n, n)."""
    L, n = z0.shape
    pert = []
    for i in range(n):
        e = np.zeros(n)
        e[i] = eps * (1.0 + np.abs(z0[:, i])).max()
        pert += [z0 + e, z0 - e]
    z = np.concatenate(pert, axis=0)
    pp = np.concatenate([par] * (2 * n), axis=0) if par.shape[1] else None
    y = integrate(vf, z, grid, params=pp, observables=False, **kw).y.reshape(2 * n, L, -1, n)
    M = np.empty((L, grid.size, n, n))
    for i in range(n):
        step = 2 * eps * (1.0 + np.abs(z0[:, i])).max()
        M[:, :, :, i] = (y[2 * i] - y[2 * i + 1]) / step
    return M


def _worst_series(name: str, err: np.ndarray) -> dict[str, np.ndarray]:
    return {f"max {name}": np.max(err, axis=0), f"median {name}": np.median(err, axis=0)}


def hamiltonised_flow_checks(
    system: Any,
    x0: Any,
    tau_final: float,
    params: Any = None,
    method: str = "gauss6",
    h: float = 0.01,
    n_out: int = 21,
    energy_tol: float = 1e-11,
    symplectic_tol: float = 1e-9,
    orbit_tol: float = 1e-8,
    rtol: float = 1e-13,
    atol: float = 1e-13,
) -> list[Check]:
    """Integrate the Hamiltonised system in ``tau`` and check it against the original flow.

    Parameters
    ----------
    system : ChaplyginSystem or ReducedChaplyginSystem
        Must be phi-simple (else ``ValueError`` naming the reason).
    x0 : array_like, shape (2 r,) or (L, 2 r)
        Initial states ``(s, p)`` of the original reduced system.
    tau_final : float
        Length of the ``tau`` interval.
    params : array_like, optional
    method : {"gauss6", "gauss4", "midpoint"}
        Symplectic scheme for the ``tau``-flow, fixed step ``h``.
    h : float
    n_out : int
        Output points on ``[0, tau_final]``.
    energy_tol : float
        Threshold on ``max |Htilde(tau) - Htilde(0)| / (1 + |Htilde(0)|)``.
    symplectic_tol : float
        Threshold on ``max |M^T J M - J|`` (variational equations; ``1e3`` times the finite
        difference error is added when the system needs numeric linear solves).
    orbit_tol : float
        Threshold on ``max |(s, p)_Hamiltonised - (s, p)_DOP853|`` at ``t(tau_k)``.
    rtol, atol : float
        Tolerances of the DOP853 reference on the original system.

    Returns
    -------
    list of Check
        ``Htilde`` conservation, symplecticity of the ``tau``-flow (with the ``t``-flow's
        defect in ``(s, p)`` as a control figure), orbit agreement.  Series are against
        ``tau`` (key ``"t"``; the mean ``t(tau)`` is a series too).
    """
    from nhfast.symbolic.equations import chaplygin_equations

    if method not in GAUSS_METHODS:
        raise ValueError(f"method must be one of {', '.join(GAUSS_METHODS)}, got {method!r}")
    red = reduced_system(system)
    r = red.rank
    tcs = time_changed_system(red)
    x = _finite_array(x0, "x0", 2, 2 * r)
    L = x.shape[0]
    par = params_rows(params, red.params, L, full=True)
    tau_final = _positive(tau_final, "tau_final")
    h = _positive(h, "h")
    for nm, tv in (("energy_tol", energy_tol), ("symplectic_tol", symplectic_tol)):
        _positive(tv, nm)
    _positive(orbit_tol, "orbit_tol")
    if not isinstance(n_out, int) or n_out < 2:
        raise ValueError(f"n_out must be an int >= 2, got {n_out!r}")
    tcs.domain_field.check_domain(np.hstack([x, np.zeros((L, 1))]), par, "x0")
    pp = par if par.shape[1] else None
    tau = np.linspace(0.0, tau_final, n_out)
    gk = {"method": method, "h": h}
    z0 = np.hstack([tcs.to_tilde(x, par), np.zeros((L, 1))])
    run = integrate(tcs.tau_field, z0, tau, params=pp, **gk)
    H = run.observables["energy"]
    t_of_tau = run.y[:, :, -1]
    checks: list[Check] = []

    # 1. Htilde conservation
    herr = np.abs(H - H[:, :1]) / (1.0 + np.abs(H[:, :1]))
    worst = float(np.max(herr))
    checks.append(
        Check(
            f"Htilde conserved along the tau-flow ({method}, h = {h:g})",
            worst <= energy_tol,
            f"max relative |Htilde - Htilde(0)| = {worst:.2e} "
            f"({'<=' if worst <= energy_tol else '>'} threshold {energy_tol:.1e})",
            {"max relative energy error": worst, "threshold": energy_tol, "trajectories": L},
            series={"t": tau, **_worst_series("|dHtilde|", herr), "mean t(tau)": t_of_tau.mean(0)},
            samples={"max |dHtilde| per trajectory": np.max(herr, axis=1)},
        )
    )

    # 2. symplecticity of the tau-flow in (s, ptilde); control: the t-flow in (s, p)
    ham = tcs.hamiltonised
    J = _omega_J(r)
    zc = z0[:, : 2 * r]
    if ham.solves:
        vf_h = ham.as_vector_field()
        M = _flow_jacobian_fd(vf_h, zc, tau, par, 1e-6, **gk)
        how, tol_s = "central differences (eps 1e-6)", symplectic_tol + 1e-6
    else:
        var = ham.as_vector_field().variational()
        xv = ham.as_vector_field().variational_initial(zc)
        yv = integrate(var, xv, tau, params=pp, observables=False, **gk).y
        M = ham.as_vector_field().variational_split(yv)[1]
        how, tol_s = "variational equations", symplectic_tol
    serr = np.max(np.abs(np.einsum("ltji,jk,ltkm->ltim", M, J, M) - J), axis=(2, 3))
    orig = chaplygin_equations(red, simplify=False).as_vector_field()
    ctrl = []
    for lane in range(L):
        tl = np.array([0.0, t_of_tau[lane, -1]])
        Mt = _flow_jacobian_fd(
            orig, x[lane : lane + 1], tl, par[lane : lane + 1], 1e-6, rtol=rtol, atol=atol
        )[0, -1]
        ctrl.append(float(np.max(np.abs(Mt.T @ J @ Mt - J))))
    sw = float(np.max(serr))
    checks.append(
        Check(
            f"tau-flow symplectic: M^T J M = J ({how})",
            sw <= tol_s,
            f"max |M^T J M - J| = {sw:.2e} ({'<=' if sw <= tol_s else '>'} {tol_s:.1e}); the "
            f"t-flow in (s, p) is not symplectic: defect {max(ctrl):.2e} (control)",
            {
                "max |M^T J M - J|": sw,
                "threshold": tol_s,
                "jacobian": how,
                "t-flow defect max |M^T J M - J| (control)": max(ctrl),
            },
            series={"t": tau, **_worst_series("|M^T J M - J|", serr)},
            samples={"t-flow symplecticity defect": np.asarray(ctrl)},
        )
    )

    # 3. orbits: tau-flow mapped back vs DOP853 on the original system at t(tau_k)
    nz = 2 * r + 1
    back = tcs.from_tilde(run.y.reshape(L * len(tau), nz), np.repeat(par, len(tau), axis=0))
    back = back.reshape(L, len(tau), 2 * r)
    oerr = np.empty((L, len(tau)))
    for lane in range(L):
        ref = integrate(
            orig,
            x[lane],
            t_of_tau[lane],
            params=par[lane] if pp is not None else None,
            method="dop853",
            rtol=rtol,
            atol=atol,
            observables=False,
        )
        oerr[lane] = np.max(np.abs(ref.y[0] - back[lane]), axis=1)
    ow = float(np.max(oerr))
    checks.append(
        Check(
            "orbits of the Hamiltonised system = original orbits after dt = exp(-phi) dtau",
            ow <= orbit_tol,
            f"max |(s, p) - (s, p)_DOP853| = {ow:.2e} at t(tau) "
            f"({'<=' if ow <= orbit_tol else '>'} {orbit_tol:.1e}; DOP853 rtol {rtol:g})",
            {
                "max state difference": ow,
                "threshold": orbit_tol,
                "final mean t": float(t_of_tau[:, -1].mean()),
            },
            series={"t": tau, **_worst_series("|d(s, p)|", oerr), "mean t(tau)": t_of_tau.mean(0)},
            samples={"max |d(s, p)| per trajectory": np.max(oerr, axis=1)},
        )
    )
    return checks


# --------------------------------------------------------------------------- report ----


def hamiltonisation_report(
    system: Any,
    x0: Any,
    t_final: float,
    params: Any = None,
    method: str = "gauss6",
    h: float = 0.01,
    n_out: int = 21,
    title: str | None = None,
) -> Report:
    """Run every Hamiltonisation check on a Chaplygin system and state the verdict.

    Sample points for the pointwise checks are the states of DOP853 trajectories of the
    original reduced system from ``x0`` over ``[0, t_final]``; the flow checks (only when the
    system is phi-simple) integrate the Hamiltonised system over ``tau in [0, t_final]``.

    Parameters
    ----------
    system : ChaplyginSystem or ReducedChaplyginSystem
    x0 : array_like, shape (2 r,) or (L, 2 r)
    t_final : float
    params : array_like, optional
    method, h, n_out
        As for :func:`hamiltonised_flow_checks`.
    title : str, optional

    Returns
    -------
    Report
        Checks: symbolic phi-simplicity, numeric fit, conformal closedness, (flow checks), and
        the verdict ``"Hamiltonisable by dt = exp(-phi) dtau"`` last.
    """
    from nhfast.symbolic.equations import chaplygin_equations

    red = reduced_system(system)
    r = red.rank
    x = _finite_array(x0, "x0", 2, 2 * r)
    t_final = _positive(t_final, "t_final")
    par = params_rows(params, red.params, x.shape[0], full=True)
    orig = chaplygin_equations(red, simplify=False).as_vector_field()
    t = np.linspace(0.0, t_final, n_out)
    traj = integrate(
        orig, x, t, params=par if par.shape[1] else None, rtol=1e-12, atol=1e-12
    ).y  # (L, n_t, 2r)
    pts = traj.reshape(-1, 2 * r)
    ppts = np.repeat(par, n_out, axis=0)
    checks = [phi_simplicity(red)]
    if r >= 2:
        checks.append(phi_simplicity_on_samples(gyroscopic_function(red), pts[:, :r], ppts))
        checks.append(conformal_closedness(red, pts, ppts))
    symbolic = checks[0].holds
    if symbolic:
        checks += hamiltonised_flow_checks(red, x, t_final, par, method=method, h=h, n_out=n_out)
    ok = bool(symbolic) and all(c.holds for c in checks)
    if ok:
        phi = checks[0].figures.get("phi", "?")
        stmt = (
            f"Hamiltonisable: phi-simple with phi = {phi}; with dt = exp(-phi) dtau and "
            "ptilde = exp(phi) p the flow is canonical Hamiltonian (every check holds)"
        )
    elif symbolic is False:
        stmt = f"not Hamiltonisable by a phi-simple time change: {checks[0].statement}"
    elif symbolic is None:
        stmt = checks[0].statement
    else:
        bad = [c.name for c in checks if not c.holds]
        stmt = "phi-simple, but some checks fail: " + "; ".join(bad)
    verdict = Check(
        "Hamiltonisable by dt = exp(-phi) dtau (García-Naranjo & Marrero (2020), Cor. 3.22)",
        ok if symbolic is not None else None,
        stmt,
        {"r": r},
    )
    return Report(
        title=title or f"Hamiltonisation of {red.name or 'a Chaplygin system'}",
        system={"name": red.name, "r": r, "params": [str(q) for q in red.params]},
        settings={"method": method, "h": h, "t_final": t_final, "trajectories": x.shape[0]},
        checks=[*checks, verdict],
    )


def summary(checks: Report | Sequence[Check]) -> str:
    """Plain-text digest: one line per check, ``HOLDS`` / ``FAILS`` / ``N/A`` and the reason."""
    items = checks.checks if isinstance(checks, Report) else list(checks)
    word = {True: "HOLDS", False: "FAILS", None: "N/A  "}
    return "\n".join(f"{word[c.holds]}  {c.name}: {c.statement}" for c in items)
