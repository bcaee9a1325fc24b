from __future__ import annotations

from pathlib import Path

import pytest

from gpulane.errors import ParseError
from gpulane.topology.sysfs import parse_sysfs_listing, read_device, upstream_links
from tests.topology.helpers import H200, text


def test_h200x2_listing() -> None:
    devs = parse_sysfs_listing(text(f"{H200}/sysfs-pci.txt"), "s")
    gpus = [d for d in devs.values() if d.is_nvidia_gpu]
    assert [g.bus_id for g in gpus] == ["0000:00:06.0", "0000:00:07.0"]
    for g in gpus:
        assert g.link is not None
        assert (g.link.gen, g.link.gen_max, g.link.width, g.link.width_max) == (5, 5, 16, 16)
        assert g.chain == []  # on the root bus of a VM: no bridge above
        assert g.numa is None
    assert devs["0000:00:01.0"].link is None


def test_listing_errors() -> None:
    with pytest.raises(ParseError) as e:
        parse_sysfs_listing(text(f"{H200}/sysfs-pci.txt").replace("max:", "mux:", 3), "s")
    assert e.value.line == 1
    with pytest.raises(ParseError, match="topo -m"):
        parse_sysfs_listing(text(f"{H200}/topo-m.txt"), "s")


def _dev(
    root: Path,
    real: Path,
    bdf: str,
    speed: str,
    width: str,
    mspeed: str,
    mwidth: str,
    vendor: str = "0x10de",
    cls: str = "0x030000",
) -> None:
    real.mkdir(parents=True, exist_ok=True)
    for name, value in (
        ("current_link_speed", speed),
        ("current_link_width", width),
        ("max_link_speed", mspeed),
        ("max_link_width", mwidth),
        ("vendor", vendor),
        ("class", cls),
        ("numa_node", "1"),
    ):
        (real / name).write_text(value + "\n")
    link = root / "bus" / "pci" / "devices" / bdf
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(real)


def fake_riser(root: Path) -> None:
    """A x16 Gen4 card behind a switch whose uplink sits in an x4 Gen3 slot."""
    rp = root / "devices" / "pci0000:00" / "0000:00:01.0"
    up = rp / "0000:01:00.0"
    dn = up / "0000:02:00.0"
    gpu = dn / "0000:03:00.0"
    _dev(root, rp, "0000:00:01.0", "8.0 GT/s PCIe", "4", "8.0 GT/s PCIe", "4", "0x8086", "0x060400")
    _dev(
        root, up, "0000:01:00.0", "8.0 GT/s PCIe", "4", "16.0 GT/s PCIe", "16", "0x10b5", "0x060400"
    )
    _dev(
        root,
        dn,
        "0000:02:00.0",
        "16.0 GT/s PCIe",
        "16",
        "16.0 GT/s PCIe",
        "16",
        "0x10b5",
        "0x060400",
    )
    _dev(root, gpu, "0000:03:00.0", "16.0 GT/s PCIe", "16", "16.0 GT/s PCIe", "16")


def test_walks_up_to_root_port(tmp_path: Path) -> None:
    fake_riser(tmp_path)
    dev = read_device("03:00.0".rjust(12, "0").replace("000003", "0000:03"), tmp_path)
    dev = read_device("0000:03:00.0", tmp_path)
    assert dev is not None and dev.is_nvidia_gpu and dev.numa == 1
    assert dev.link is not None and (dev.link.gen, dev.link.width, dev.link.downtrained) == (
        4,
        16,
        False,
    )
    assert dev.chain == ["0000:02:00.0", "0000:01:00.0", "0000:00:01.0"]
    ups = upstream_links("0000:03:00.0", tmp_path)
    assert [(u.bus_id, u.gen, u.width, u.width_max) for u in ups] == [
        ("0000:02:00.0", 4, 16, 16),
        ("0000:01:00.0", 3, 4, 16),
        ("0000:00:01.0", 3, 4, 4),
    ]
    assert read_device("0000:09:00.0", tmp_path) is None
