"""Offline data sets, partitioners and scenarios for simulations."""

from __future__ import annotations

from pubsubml.sim.datasets import Dataset, hyperplane, hyperplane_chunks, hyperplane_schema

__all__ = ["Dataset", "hyperplane", "hyperplane_chunks", "hyperplane_schema"]
