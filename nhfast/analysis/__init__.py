"""Checks on sampled trajectories: invariant measures, Hamiltonisation, drift, reports."""
