"""`sluice simulate` takes the DeviceClass -> quota resource mapping from the scheduler
configuration it reads (--config, or the scheduler ConfigMap in the dump): no flag of its own."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from dump_objects import queue, write
from typer.testing import CliRunner

from sluice.api.constants import CONFIGMAP_NAME
from sluice.cli.main import _register, app
from sluice.cli.simulate import read_dump
from sluice.cli.snapshot_io import load_config_file

_register()
runner = CliRunner()
NOW = datetime(2026, 3, 2, 9, tzinfo=UTC)

MAPPINGS = (
    "deviceClassMappings:\n"
    "- name: nvidia.com/gpu\n"
    "  deviceClassNames: [gpu.nvidia.com, a100.nvidia.com]\n"
    "- name: nvidia.com/mig-1g.10gb\n"
    "  deviceClassNames: [mig-1g.10gb.nvidia.com]\n"
)
MAPPED = {
    "gpu.nvidia.com": "nvidia.com/gpu",
    "a100.nvidia.com": "nvidia.com/gpu",
    "mig-1g.10gb.nvidia.com": "nvidia.com/mig-1g.10gb",
}


def config_map(text: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": CONFIGMAP_NAME, "namespace": "sluice-system"},
        "data": {"scheduler.yaml": text},
    }


@pytest.mark.parametrize("shape", ["scheduler.yaml", "ConfigMap manifest"])
def test_config_flag_carries_the_device_class_mappings(tmp_path: Path, shape: str) -> None:
    path = tmp_path / "scheduler.yaml"
    text = 'actions: "enqueue, allocate"\n' + MAPPINGS
    path.write_text(text if shape == "scheduler.yaml" else yaml.safe_dump(config_map(text)))
    dump = write(tmp_path, [queue("root"), config_map("actions: allocate\n")])
    snapshot = read_dump(dump, NOW, load_config_file(path), CONFIGMAP_NAME).snapshot
    assert dict(snapshot.config.device_mapping.resources) == MAPPED
    assert snapshot.config.actions == ("enqueue", "allocate")  # --config wins over the dump's


def test_the_dumps_scheduler_config_map_carries_them_without_config(tmp_path: Path) -> None:
    dump = write(tmp_path, [queue("root"), config_map(MAPPINGS)])
    snapshot = read_dump(dump, NOW, None, CONFIGMAP_NAME).snapshot
    assert dict(snapshot.config.device_mapping.resources) == MAPPED


def test_a_mapping_loads_without_warnings_and_a_bad_one_is_one_line(tmp_path: Path) -> None:
    dump = str(write(tmp_path, [queue("root")]))
    good = tmp_path / "good.yaml"
    good.write_text(MAPPINGS)
    result = runner.invoke(app, ["simulate", dump, "--config", str(good), "-o", "json"])
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    bad = tmp_path / "bad.yaml"
    bad.write_text(MAPPINGS + "- name: example.com/gpu\n  deviceClassNames: [gpu.nvidia.com]\n")
    result = runner.invoke(app, ["simulate", dump, "--config", str(bad)])
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert "bad.yaml" in line and "deviceClassMappings[2].deviceClassNames" in line
    assert "class gpu.nvidia.com already counts as nvidia.com/gpu" in line


def test_the_help_says_where_the_mapping_comes_from_and_what_to_dump() -> None:
    result = runner.invoke(app, ["simulate", "--help"], env={"COLUMNS": "400"})
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    assert "deviceClassMappings" in text
    assert "deviceclasses,resourceslices,resourceclaims,resourceclaimtemplates" in text
