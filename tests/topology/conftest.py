"""The NVML stand-in fixtures (tests/topology/nvml_fake.py)."""

from tests.topology.nvml_fake import machine, nvml_dir  # noqa: F401
