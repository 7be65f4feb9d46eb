"""The living local cluster for a benchmark: started in a scratch directory with sluice's
CRDs installed, stopped and removed when the benchmark is done."""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "hack"))

import controlplane  # noqa: E402


@contextmanager
def living_cluster(leave_out: tuple[str, ...] = ()) -> Iterator[tuple[Any, Any, Path]]:
    """(the cluster, an API client for it, the scratch directory for logs); ``leave_out``:
    living processes not started."""
    from sluice.kube import api_client

    with tempfile.TemporaryDirectory() as tmp:
        state = Path(tmp)
        plane = controlplane.ControlPlane(
            state, tie_to_parent=True, data_root=state, leave_out=leave_out
        )
        print("[bench] starting the living cluster", file=sys.stderr, flush=True)
        cluster = plane.up()
        try:
            controlplane.install_crds(cluster, REPO / "crds")
            yield cluster, api_client(str(cluster.kubeconfig)), state
        finally:
            plane.down()
