"""The image is small, pinned and runs as a non-root user (no Docker engine is needed to check
what the Dockerfile says)."""

from __future__ import annotations

import json
import re
from pathlib import Path

DOCKERFILE = Path(__file__).resolve().parents[3] / "Dockerfile"


def instructions() -> list[tuple[str, str]]:
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            out.append((keyword.upper(), rest.strip()))
    return out


def test_base_images_are_pinned_to_an_exact_version() -> None:
    bases = [rest.split()[0] for keyword, rest in instructions() if keyword == "FROM"]
    assert len(bases) == 2  # build stage + final stage: no build tools in the image
    for base in bases:
        _, _, tag = base.partition(":")
        assert tag and tag != "latest" and re.match(r"\d+\.\d+\.\d+", tag), base


def test_runs_as_a_numeric_non_root_user() -> None:
    users = [rest for keyword, rest in instructions() if keyword == "USER"]
    assert users and users[-1].split(":")[0].isdigit() and users[-1].split(":")[0] != "0"


def test_entrypoint_is_the_sluice_command() -> None:
    entry = [rest for keyword, rest in instructions() if keyword == "ENTRYPOINT"]
    assert json.loads(entry[-1]) == ["sluice"]


def test_the_final_stage_installs_wheels_only() -> None:
    final = instructions()
    start = max(i for i, (k, _) in enumerate(final) if k == "FROM")
    copies = [rest for keyword, rest in final[start:] if keyword == "COPY"]
    assert copies == ["--from=build /wheels /wheels"]


def test_the_final_stage_cannot_fetch_or_build_packages() -> None:
    final = instructions()
    start = max(i for i, (k, _) in enumerate(final) if k == "FROM")
    runs = " ".join(rest for keyword, rest in final[start:] if keyword == "RUN")
    assert "pip install --no-index /wheels/*.whl" in runs
    assert "pip uninstall --yes pip setuptools wheel" in runs


def test_what_the_image_drops_is_never_imported() -> None:
    # The image removes the kubernetes client's asyncio copy; sluice must not need it.
    uses = re.compile(r"\bkubernetes\.aio\b|from kubernetes import [^\n]*\baio\b")
    sources = (DOCKERFILE.parent / "sluice").rglob("*.py")
    assert not [p for p in sources if uses.search(p.read_text())]
    assert uses.search("from kubernetes import aio") and not uses.search("import aiohttp")
