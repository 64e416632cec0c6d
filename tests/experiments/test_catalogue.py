"""The example catalogue: defaults, samplers on the constraint manifold and inside the chart,
the claims' formulas (García-Naranjo & Marrero 2020, Thm 4.3), bad input."""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp

from nhfast.experiments import EXAMPLES, build_example, get_example
from nhfast.systems.veselova_body import default_inertia


def test_veselova_defaults_and_sampler_on_constraint_manifold():
    inst = build_example("veselova", 5)
    np.testing.assert_allclose(inst.params, [1 + i / 5 for i in range(1, 6)])
    np.testing.assert_allclose(default_inertia(4), [1.25, 1.5, 1.75, 2.0])
    x0 = inst.sample(50, seed=3)
    gamma, m = x0[:, :5], x0[:, 5:]
    np.testing.assert_allclose(np.sum(gamma**2, axis=1), 1.0, rtol=1e-14)
    np.testing.assert_allclose(np.sum(gamma * m, axis=1), 0.0, atol=1e-14)
    vf = inst.vector_field
    obs = sp.lambdify([vf.states, vf.params], [vf.observables["energy"]])
    energy = np.array([obs(x, inst.params)[0] for x in x0])
    np.testing.assert_allclose(energy, 0.5, rtol=1e-13)
    np.testing.assert_array_equal(x0, inst.sample(50, seed=3))
    assert not np.array_equal(x0, inst.sample(50, seed=4))
    # log_density is the seed's (2 - n)/2 ln (A gamma, gamma)
    a = sp.symbols("a1:6", positive=True)
    g = vf.states[:5]
    expect = sp.Rational(-3, 2) * sp.log(sum(a[k] * g[k] ** 2 for k in range(5)))
    assert sp.simplify(inst.log_density - expect) == 0


@pytest.mark.parametrize("name", list(EXAMPLES))
def test_every_example_builds_and_samples(name):
    ex = get_example(name)
    inst = ex.build()
    x0 = inst.sample(7, seed=1)
    assert x0.shape == (7, inst.vector_field.n_state) and np.all(np.isfinite(x0))
    assert inst.params.shape == (inst.vector_field.n_params,)
    assert inst.energy in inst.vector_field.observables
    for c in inst.constraints:
        assert c in inst.vector_field.observables
    assert ex.summary and "\n" not in ex.summary


def test_library_bad_input():
    with pytest.raises(KeyError, match="example: unknown 'nope'; choose one of veselova"):
        get_example("nope")
    with pytest.raises(ValueError, match="n: example 'veselova' needs an int n >= 3"):
        build_example("veselova", 2)
    with pytest.raises(ValueError, match="n: example 'disk' has no size parameter"):
        build_example("disk", 4)
    with pytest.raises(ValueError, match="lanes must be an int >= 1"):
        build_example("disk").sample(0)


def test_veselova_chart_sampler_inside_the_chart_at_energy_one_half():
    from nhfast.systems.veselova_body import chart_to_embedded

    inst = build_example("veselova", 4)
    x = inst.chart_sampler(np.random.default_rng(0), 30)
    s, p = x[:, :3], x[:, 3:]
    assert np.all(np.linalg.norm(s, axis=1) < 0.4)
    gamma, m = chart_to_embedded(s, p)  # the independent map back to the embedded form
    vf = inst.vector_field
    energy = sp.lambdify([vf.states, vf.params], vf.observables["energy"])
    e = np.array([energy(np.concatenate(gm), inst.params) for gm in zip(gamma, m, strict=True)])
    np.testing.assert_allclose(e, 0.5, rtol=1e-12)
