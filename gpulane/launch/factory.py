"""The launcher a configuration names (``launcher=NAME``), from the one registry
(:mod:`gpulane.launch.registry`); kept for the callers that import it from here."""

from __future__ import annotations

from gpulane.launch.registry import host_launcher, make_launcher, node_launcher

__all__ = ["host_launcher", "make_launcher", "node_launcher"]
