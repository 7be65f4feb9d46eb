"""Build (or find) the control-plane binaries the end-to-end tests run, and the workload
controllers they run beside them (KubeRay, Kubeflow's training-operator, JobSet, the MPI
operator).

The pins live in the committed Go modules under hack/tools/: the versions of
k8s.io/kubernetes, of the etcd server, of helm, of KWOK and of each controller are read from
their go.mod files, so bumping a release is one edit there plus `go mod tidy`. Binaries are
cached outside the repository, one directory per set of pins (the control plane's) or per
controller and pin, and a directory counts only once its `.complete` marker exists (written
last), so an interrupted build is redone rather than half-used. A controller has a directory
of its own so that adding or bumping one never invalidates the control plane's build.

Standard library only: this runs before the project's Python dependencies are
installed.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

HACK_DIR = Path(__file__).resolve().parent.parent
TOOLS_DIR = HACK_DIR / "tools"
KUBERNETES_MODULE = TOOLS_DIR / "kubernetes"
HELM_MODULE = TOOLS_DIR / "helm"
KWOK_MODULE = TOOLS_DIR / "kwok"

BINARIES = (
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kubectl",
    "helm",
    "kwok",
)
COMPLETE_MARKER = ".complete"


class BinariesMissing(RuntimeError):
    """The cache has no complete build for the pinned versions."""


@dataclass(frozen=True)
class Pins:
    kubernetes: str
    etcd: str
    helm: str
    kwok: str
    # Of the go.mod files: a tool added or a replace moved changes the build too.
    modules_digest: str

    @property
    def key(self) -> str:
        return (
            f"k8s-{self.kubernetes}-etcd-{self.etcd}-helm-{self.helm}-kwok-{self.kwok}"
            f"-{self.modules_digest}"
        )


def _required_version(go_mod: Path, module: str) -> str:
    pattern = re.compile(rf"^\s*(?:require\s+)?{re.escape(module)}\s+(v\S+)", re.MULTILINE)
    match = pattern.search(go_mod.read_text())
    if match is None:
        raise RuntimeError(f"{go_mod} does not require {module}")
    return match.group(1)


def _modules_digest() -> str:
    digest = hashlib.sha256()
    for module in (KUBERNETES_MODULE, HELM_MODULE, KWOK_MODULE):
        lines = (module / "go.mod").read_text().splitlines()
        digest.update("\n".join(x for x in lines if not x.lstrip().startswith("//")).encode())
    return digest.hexdigest()[:8]


def pins() -> Pins:
    return Pins(
        kubernetes=_required_version(KUBERNETES_MODULE / "go.mod", "k8s.io/kubernetes"),
        etcd=_required_version(KUBERNETES_MODULE / "go.mod", "go.etcd.io/etcd/server/v3"),
        helm=_required_version(HELM_MODULE / "go.mod", "helm.sh/helm/v3"),
        kwok=_required_version(KWOK_MODULE / "go.mod", "sigs.k8s.io/kwok"),
        modules_digest=_modules_digest(),
    )


def cache_root() -> Path:
    override = os.environ.get("SLUICE_CACHE_DIR")
    if override:
        return Path(override)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "sluice"


def bin_dir(p: Pins | None = None) -> Path:
    return cache_root() / "bin" / (p or pins()).key


def find_binaries() -> dict[str, Path]:
    """Paths of the cached binaries; raises BinariesMissing with the fix."""
    directory = bin_dir()
    if not (directory / COMPLETE_MARKER).exists():
        raise BinariesMissing(
            f"no complete control-plane build in {directory}; "
            "run `hack/build-binaries` (a first build takes a while)"
        )
    return {name: directory / name for name in BINARIES}


def _log(message: str) -> None:
    print(f"[build-binaries] {message}", file=sys.stderr, flush=True)


def _go_env() -> dict[str, str]:
    env = dict(os.environ)
    # Never let a go.mod line silently download another toolchain; static,
    # reproducible binaries as the upstream release builds make them.
    env.update(GOTOOLCHAIN="local", CGO_ENABLED="0", GOFLAGS="-trimpath -mod=readonly")
    return env


def _jobs() -> str:
    return os.environ.get("SLUICE_BUILD_JOBS") or str(max(1, min(2, os.cpu_count() or 1)))


def _kube_ldflags(version: str) -> str:
    # Without these, /version reports v0.0.0-master, which breaks charts with
    # a kubeVersion constraint and the apiserver's own compatibility checks.
    major, minor = version.lstrip("v").split(".")[:2]
    flags = ["-s", "-w"]
    for package in ("k8s.io/client-go/pkg/version", "k8s.io/component-base/version"):
        flags += [
            f"-X {package}.gitVersion={version}",
            f"-X {package}.gitMajor={major}",
            f"-X {package}.gitMinor={minor}",
            f"-X {package}.gitTreeState=clean",
        ]
    return " ".join(flags)


def _helm_ldflags(p: Pins) -> str:
    major, minor = p.kubernetes.lstrip("v").split(".")[:2]
    return " ".join(
        [
            "-s",
            "-w",
            f"-X helm.sh/helm/v3/internal/version.version={p.helm}",
            "-X helm.sh/helm/v3/internal/version.gitTreeState=clean",
            f"-X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor={major}",
            f"-X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor={minor}",
            f"-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor={major}",
            f"-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor={minor}",
        ]
    )


def _count_packages(module: Path, packages: list[str], env: dict[str, str]) -> int:
    result = subprocess.run(
        ["go", "list", "-deps", *packages],
        cwd=module,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return len(result.stdout.split())


def _go_build(
    label: str, module: Path, packages: list[str], ldflags: str, out: Path, log: Path
) -> None:
    env = _go_env()
    _log(f"{label}: resolving modules (downloads from the Go module proxy on first use)")
    subprocess.run(["go", "mod", "download"], cwd=module, env=env, check=True)
    total = _count_packages(module, packages, env)
    _log(f"{label}: compiling up to {total} packages with -p {_jobs()} (log: {log})")
    command = [
        "nice",
        "-n",
        "10",
        "go",
        "build",
        "-v",
        "-p",
        _jobs(),
        "-ldflags",
        ldflags,
        "-o",
        f"{out}/",
        *packages,
    ]
    started = time.monotonic()
    compiled = 0
    last_report = started
    with log.open("a") as log_file:
        log_file.write(f"$ {' '.join(command)}\n")
        process = subprocess.Popen(
            command,
            cwd=module,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        assert process.stdout is not None
        for line in process.stdout:
            log_file.write(line)
            compiled += 1
            now = time.monotonic()
            if now - last_report >= 30:
                last_report = now
                _log(f"{label}: {compiled}/{total} packages, {now - started:.0f}s")
        code = process.wait()
    if code != 0:
        tail = "".join(log.read_text().splitlines(keepends=True)[-40:])
        raise RuntimeError(f"{label}: go build failed (exit {code}); end of {log}:\n{tail}")
    _log(f"{label}: done in {time.monotonic() - started:.0f}s")


def _kwok_ldflags(p: Pins) -> str:
    return f"-s -w -X sigs.k8s.io/kwok/pkg/consts.Version={p.kwok.lstrip('v')}"


@contextlib.contextmanager
def _build_lock(target: Path) -> Iterator[None]:
    """One build per set of pins at a time: the cache is shared by every checkout on the
    machine, and a second build started meanwhile waits and then reuses the first."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.with_name(target.name + ".lock").open("w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            _log(f"another build of {target.name} is running; waiting for it")
            fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def build(force: bool = False) -> Path:
    """Build every binary into the cache unless a complete build is there."""
    p = pins()
    target = bin_dir(p)
    if (target / COMPLETE_MARKER).exists() and not force:
        _log(f"reusing {target}")
        return target
    if shutil.which("go") is None:
        raise RuntimeError("the Go toolchain is needed to build the control plane (go not on PATH)")
    with _build_lock(target):
        if (target / COMPLETE_MARKER).exists() and not force:
            _log(f"reusing {target}, built meanwhile")
            return target
        return _build(p, target)


def _build(p: Pins, target: Path) -> Path:
    _log(
        f"building Kubernetes {p.kubernetes} (kube-apiserver, kube-controller-manager,"
        f" kube-scheduler, kubectl), etcd {p.etcd}, helm {p.helm} and KWOK {p.kwok}"
    )
    _log(f"into {target}; a first build takes tens of minutes on 2 cores")
    started = time.monotonic()
    staging = target.with_name(target.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    log = staging / "build.log"
    _go_build(
        "kubernetes",
        KUBERNETES_MODULE,
        [
            "k8s.io/kubernetes/cmd/kube-apiserver",
            "k8s.io/kubernetes/cmd/kube-controller-manager",
            "k8s.io/kubernetes/cmd/kube-scheduler",
            "k8s.io/kubernetes/cmd/kubectl",
            "go.etcd.io/etcd/server/v3",
        ],
        _kube_ldflags(p.kubernetes),
        staging,
        log,
    )
    # `go build -o dir/` names a /vN module's main package after its parent.
    (staging / "server").rename(staging / "etcd")
    _go_build("helm", HELM_MODULE, ["helm.sh/helm/v3/cmd/helm"], _helm_ldflags(p), staging, log)
    _go_build("kwok", KWOK_MODULE, ["sigs.k8s.io/kwok/cmd/kwok"], _kwok_ldflags(p), staging, log)
    for name in BINARIES:
        if not (staging / name).is_file():
            raise RuntimeError(f"build finished without {name} in {staging}")
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    (target / COMPLETE_MARKER).write_text(f"{p.key}\n")
    _log(f"all binaries ready in {target} after {time.monotonic() - started:.0f}s")
    return target


# -- workload controllers -------------------------------------------------------------------


@dataclass(frozen=True)
class Controller:
    """A workload controller built from its published Go module (hack/tools/<name>/go.mod pins
    it), run by the e2e tests as a local process."""

    name: str
    module: str  # the upstream Go module, whose version go.mod pins
    package: str  # its main package
    binary: str  # what `go build -o dir/` names it
    crds: tuple[str, ...]  # its CustomResourceDefinitions, inside the module
    version_variable: str = ""  # a string variable given the version at link time

    @property
    def tool_dir(self) -> Path:
        return TOOLS_DIR / self.name

    @property
    def version(self) -> str:
        return _required_version(self.tool_dir / "go.mod", self.module)

    @property
    def key(self) -> str:
        lines = (self.tool_dir / "go.mod").read_text().splitlines()
        text = "\n".join(x for x in lines if not x.lstrip().startswith("//"))
        return f"{self.name}-{self.version}-{hashlib.sha256(text.encode()).hexdigest()[:8]}"

    def ldflags(self) -> str:
        flags = ["-s", "-w"]
        if self.version_variable:
            flags.append(f"-X {self.version_variable}={self.version}")
        return " ".join(flags)


KUBERAY = Controller(
    name="kuberay",
    module="github.com/ray-project/kuberay/ray-operator",
    package="github.com/ray-project/kuberay/ray-operator",
    binary="ray-operator",
    # Its manager watches all three kinds; without one CRD it does not start.
    crds=(
        "config/crd/bases/ray.io_rayclusters.yaml",
        "config/crd/bases/ray.io_rayjobs.yaml",
        "config/crd/bases/ray.io_rayservices.yaml",
    ),
)
TRAINING_OPERATOR = Controller(
    name="training-operator",
    module="github.com/kubeflow/training-operator",
    package="github.com/kubeflow/training-operator/cmd/training-operator.v1",
    binary="training-operator.v1",
    # Only PyTorchJob: its MPIJob is kubeflow.org/v1, the same CRD name as the MPI operator's
    # v2beta1, which sluice follows.
    crds=("manifests/base/crds/kubeflow.org_pytorchjobs.yaml",),
)
JOBSET = Controller(
    name="jobset",
    module="sigs.k8s.io/jobset",
    package="sigs.k8s.io/jobset",
    binary="jobset",
    crds=("config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml",),
    version_variable="sigs.k8s.io/jobset/pkg/version.GitVersion",
)
MPI_OPERATOR = Controller(
    name="mpi-operator",
    module="github.com/kubeflow/mpi-operator",
    package="github.com/kubeflow/mpi-operator/cmd/mpi-operator",
    binary="mpi-operator",
    crds=("manifests/base/kubeflow.org_mpijobs.yaml",),
    version_variable="github.com/kubeflow/mpi-operator/pkg/version.Version",
)
CONTROLLERS = (KUBERAY, TRAINING_OPERATOR, JOBSET, MPI_OPERATOR)


def controller_dir(controller: Controller) -> Path:
    return cache_root() / "controllers" / controller.key


def find_controller(controller: Controller) -> Path:
    """The cached binary of a controller; raises BinariesMissing with the fix."""
    directory = controller_dir(controller)
    if not (directory / COMPLETE_MARKER).exists():
        raise BinariesMissing(
            f"no complete build of {controller.name} {controller.version} in {directory}; "
            "run `hack/build-binaries`"
        )
    return directory / controller.binary


def module_source(controller: Controller) -> Path:
    """The controller's module as published, in the Go module cache (read-only): its CRDs and
    manifests are read from there, never copied into the repository. `go mod download`
    fetches it again when the module cache was cleaned since the build."""
    result = subprocess.run(
        ["go", "mod", "download", "-json", f"{controller.module}@{controller.version}"],
        cwd=controller.tool_dir,
        env=_go_env(),
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        raise BinariesMissing(
            f"cannot find {controller.module}@{controller.version} in the Go module cache:"
            f" {result.stderr.strip() or result.stdout.strip()}"
        )
    directory = Path(json.loads(result.stdout)["Dir"])
    if not directory.is_dir():
        raise BinariesMissing(f"{directory} is missing after `go mod download`")
    return directory


def crd_files(controller: Controller) -> list[Path]:
    source = module_source(controller)
    return [source / relative for relative in controller.crds]


def build_controllers(force: bool = False) -> list[Path]:
    """Build every controller into its own cache directory unless a complete build is there."""
    return [_build_controller(c, force) for c in CONTROLLERS]


def _build_controller(controller: Controller, force: bool) -> Path:
    target = controller_dir(controller)
    if (target / COMPLETE_MARKER).exists() and not force:
        _log(f"reusing {target}")
        return target
    if shutil.which("go") is None:
        raise RuntimeError(f"the Go toolchain is needed to build {controller.name}")
    with _build_lock(target):
        if (target / COMPLETE_MARKER).exists() and not force:
            _log(f"reusing {target}, built meanwhile")
            return target
        _log(f"building {controller.name} {controller.version} ({controller.package})")
        started = time.monotonic()
        staging = target.with_name(target.name + ".partial")
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        log = staging / "build.log"
        _go_build(
            controller.name,
            controller.tool_dir,
            [controller.package],
            controller.ldflags(),
            staging,
            log,
        )
        if not (staging / controller.binary).is_file():
            raise RuntimeError(f"build finished without {controller.binary} in {staging}")
        shutil.rmtree(target, ignore_errors=True)
        staging.rename(target)
        (target / COMPLETE_MARKER).write_text(f"{controller.key}\n")
        size = (target / controller.binary).stat().st_size / 2**20
        _log(
            f"{controller.name} ready in {target} after {time.monotonic() - started:.0f}s"
            f" ({size:.0f} MiB)"
        )
        return target


def build_go_command(package: str, version: str) -> Path:
    """A Go command built from its published module (``go install package@version``) into
    ``<cache>/tools/<name>-<version>/`` on first use, and reused after: what the benchmarks
    drive load with. Built into a staging directory and renamed, under the build lock, so
    parallel runs neither clash nor see half a binary."""
    name = package.rstrip("/").rsplit("/", 1)[-1]
    target = cache_root() / "tools" / f"{name}-{version}"
    binary = target / name
    if binary.is_file():
        return binary
    with _build_lock(target):
        if binary.is_file():
            return binary
        staging = target.with_name(target.name + ".partial")
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        env = _go_env()
        env.update(GOBIN=str(staging), GOFLAGS="-trimpath")
        _log(f"building {package}@{version}")
        subprocess.run(["go", "install", f"{package}@{version}"], env=env, check=True)
        shutil.rmtree(target, ignore_errors=True)
        staging.rename(target)
    return binary
