"""Webhook load benchmark: realistic Job AdmissionReviews over HTTPS with keep-alive.

One server process (the real aiohttp app and handlers, its Queue cache fed directly, so the
numbers are the server's and not an API server's) and a compiled load generator, hey
(github.com/rakyll/hey v0.1.4, built from its Go module into ~/.cache/sluice/tools/ on first
use), with a fixed number of concurrent keep-alive connections: half of them post
/mutate/jobs, half /validate/jobs, the pair the API server sends for a tenant's ``kubectl
create job``. A Python client saturates near the server's own rate on a small machine, so
server and floor would measure the same; hey costs a fraction of that. Without a Go
toolchain the Python client drives the load instead, and the output says so. Bounded in
requests and time; loopback only.

Beside it, the floor measured in the same run: a bare aiohttp server on the same TLS setup
that only parses each review and allows it, under the same load; the ratio of the two is
what sluice's rules cost, whatever the machine's speed.

Run: ``.venv/bin/python -m bench.bench_webhooks [--requests N] [--connections C]``.
Targets: >= 2,000 reviews/s, p99 <= 10 ms, zero errors.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import io
import json
import multiprocessing
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
HEY = ("github.com/rakyll/hey", "v0.1.4")
TARGET_RPS = 2000
TARGET_P99_MS = 10.0


def _bare_server(port: int, cert: str, key: str, ready: Any) -> None:
    """The floor: parse the AdmissionReview, answer allowed, nothing else."""
    from aiohttp import web

    async def allow(request: web.Request) -> web.Response:
        review = json.loads(await request.read())
        uid = review["request"]["uid"]
        return web.json_response(
            {
                "apiVersion": "admission.k8s.io/v1",
                "kind": "AdmissionReview",
                "response": {"uid": uid, "allowed": True},
            }
        )

    async def main() -> None:
        app = web.Application()
        for kind in REVIEWS:
            app.router.add_post(f"/mutate/{kind}", allow)
            app.router.add_post(f"/validate/{kind}", allow)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(cert, key)
        await web.TCPSite(runner, "127.0.0.1", port, ssl_context=context).start()
        ready.set()
        await asyncio.Event().wait()

    asyncio.run(main())


def _server(port: int, cert: str, key: str, ready: Any) -> None:
    from sluice.api.resources import Resources
    from sluice.webhooks.cache import QueueCache
    from sluice.webhooks.handlers import Context
    from sluice.webhooks.server import ReloadingTLS, serve

    class Facts:
        async def queue_holds_jobs(self, queue: str) -> bool:
            return False

        async def namespace_default_queue(self, namespace: str) -> str | None:
            return None

        async def namespace_labels(self, namespace: str) -> dict[str, str]:
            return {"team": "ml"}

        def cluster_capacity(self) -> Resources | None:
            return None

    cache = QueueCache()
    queues: list[dict[str, Any]] = [{"metadata": {"name": "root"}}]
    for d in range(10):
        queues.append({"metadata": {"name": f"dept-{d}"}, "spec": {"parent": "root"}})
        for t in range(10):
            queues.append(
                {
                    "metadata": {"name": f"team-{d}-{t}"},
                    "spec": {
                        "parent": f"dept-{d}",
                        "priorityClassName": "batch",
                        # half the teams take jobs only from their namespaces
                        **({"namespaceSelector": {"matchLabels": {"team": "ml"}}} if t % 2 else {}),
                    },
                }
            )
    cache.replace(queues)
    ctx = Context(cache=cache, facts=Facts(), operator_users=frozenset({"sluice"}))

    async def main() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(
            serve(ctx, "127.0.0.1", port, ReloadingTLS(Path(cert), Path(key)), stop)
        )
        await asyncio.sleep(0.5)
        ready.set()
        await task

    asyncio.run(main())


def review(i: int) -> dict[str, Any]:
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": f"train-{i}",
            "namespace": "ml",
            "labels": {"sluice.dev/queue-name": f"team-{i % 10}-{i % 7}", "app": "trainer"},
        },
        "spec": {
            "parallelism": 4,
            "completions": 4,
            "template": {
                "metadata": {"labels": {"app": "trainer"}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "trainer",
                            "image": "registry.example/trainer:1.4",
                            "args": ["--epochs=10", "--batch=256"],
                            "resources": {
                                "requests": {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "1"},
                                "limits": {"memory": "16Gi", "nvidia.com/gpu": "1"},
                            },
                        }
                    ],
                },
            },
        },
    }
    return _create_review(
        i, "batch", job, {"username": "alice", "groups": ["system:authenticated"]}
    )


def _create_review(i: int, group: str, obj: dict[str, Any], user: dict[str, Any]) -> dict[str, Any]:
    """The AdmissionReview the API server sends for the creation of ``obj`` in ml."""
    kind = obj["kind"]
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": f"uid-{i}",
            "kind": {"group": group, "version": "v1", "kind": kind},
            "resource": {"group": group, "version": "v1", "resource": f"{kind.lower()}s"},
            "operation": "CREATE",
            "name": obj["metadata"]["name"],
            "namespace": "ml",
            "userInfo": user,
            "object": obj,
        },
    }


def pod_review(i: int) -> dict[str, Any]:
    """A Deployment's pod of a queue, as the API server sends it for its creation."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"serve-7d9f-{i:05d}",
            "namespace": "ml",
            "labels": {"sluice.dev/queue-name": f"team-{i % 10}-{i % 7}", "app": "serve"},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": "serve-7d9f",
                    "uid": "rs-uid",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "restartPolicy": "Always",
            "containers": [
                {
                    "name": "server",
                    "image": "registry.example/server:2.1",
                    "ports": [{"containerPort": 8080}],
                    "resources": {
                        "requests": {"cpu": "2", "memory": "8Gi", "nvidia.com/gpu": "1"},
                        "limits": {"memory": "8Gi", "nvidia.com/gpu": "1"},
                    },
                }
            ],
        },
    }
    user = {"username": "system:serviceaccount:kube-system:replicaset-controller"}
    return _create_review(i, "", pod, user)


REVIEWS = {"jobs": review, "pods": pod_review}
"""What a load sends, by the resource the endpoints review: /mutate/<it>, /validate/<it>."""


def _load(
    port: int, ca: str, requests: int, connections: int, out: Any, kind: str = "jobs"
) -> None:
    import aiohttp

    bodies = [json.dumps(REVIEWS[kind](i)).encode() for i in range(200)]

    async def main() -> dict[str, Any]:
        context = ssl.create_default_context(cafile=ca)
        connector = aiohttp.TCPConnector(ssl=context, limit=connections)
        latencies: list[float] = []
        errors = 0
        counter = iter(range(requests))
        async with aiohttp.ClientSession(connector=connector) as session:

            async def worker() -> None:
                nonlocal errors
                for i in counter:
                    path = f"/mutate/{kind}" if i % 2 == 0 else f"/validate/{kind}"
                    started = time.perf_counter()
                    try:
                        async with session.post(
                            f"https://127.0.0.1:{port}{path}",
                            data=bodies[i % len(bodies)],
                            headers={"Content-Type": "application/json"},
                        ) as resp:
                            body = await resp.read()
                            if resp.status != 200 or b'"allowed": true' not in body:
                                errors += 1
                    except aiohttp.ClientError:
                        errors += 1
                    latencies.append(time.perf_counter() - started)

            # warm-up: TLS handshakes and first requests are not part of the measurement
            began = time.perf_counter()
            await asyncio.gather(*(worker() for _ in range(connections)))
            elapsed = time.perf_counter() - began
        return {"latencies": latencies, "errors": errors, "elapsed": elapsed}

    out.put(asyncio.run(main()))


def hey() -> Path | None:
    """The hey binary, built on first use; None (and why, on stderr) without a Go toolchain."""
    sys.path.insert(0, str(REPO / "hack"))
    from controlplane import binaries

    try:
        return binaries.build_go_command(*HEY)
    except (OSError, subprocess.CalledProcessError) as err:
        print(
            f"[bench] cannot build hey ({err}): the Python client drives the load", file=sys.stderr
        )
        return None


def _hey_load(
    binary: Path, port: int, requests: int, connections: int, kind: str, tmp: Path
) -> dict[str, Any]:
    """hey posting one review body: half the connections to /mutate, half to /validate."""
    body = tmp / f"{kind}.json"
    body.write_bytes(json.dumps(REVIEWS[kind](0)).encode())
    half = max(1, connections // 2)
    each = max(half, requests // 2 // half * half)  # hey gives each connection n/c requests
    flags = ["-n", str(each), "-c", str(half), "-m", "POST", "-T", "application/json"]
    commands = [
        [str(binary), *flags, "-D", str(body), "-o", "csv", f"https://127.0.0.1:{port}/{v}/{kind}"]
        for v in ("mutate", "validate")
    ]
    began = time.perf_counter()
    running = [subprocess.Popen(c, stdout=subprocess.PIPE, text=True) for c in commands]
    outputs = [p.communicate(timeout=600)[0] for p in running]
    elapsed = time.perf_counter() - began
    latencies: list[float] = []
    errors = 0
    spans: list[float] = []
    for output in outputs:
        rows = list(csv.DictReader(io.StringIO(output)))
        latencies += [float(row["response-time"]) for row in rows]
        errors += sum(row["status-code"] != "200" for row in rows)
        errors += each - len(rows)  # requests that got no answer at all
        spans.append(max((float(r["offset"]) + float(r["response-time"]) for r in rows), default=0))
    # hey's own start-up is not the server's time: from hey's first request to its last answer
    return {"latencies": latencies, "errors": errors, "elapsed": max(spans) or elapsed}


def _check_answers(port: int, ca: str, kind: str) -> None:
    """hey counts status codes only: one review of each endpoint must come back allowed."""
    context = ssl.create_default_context(cafile=ca)
    for verb in ("mutate", "validate"):
        request = urllib.request.Request(
            f"https://127.0.0.1:{port}/{verb}/{kind}",
            data=json.dumps(REVIEWS[kind](0)).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, context=context, timeout=10) as answer:
            if not json.loads(answer.read())["response"]["allowed"]:
                raise SystemExit(f"/{verb}/{kind} did not allow the benchmark's review")


def run(
    requests: int,
    connections: int,
    target: Any = _server,
    kind: str = "jobs",
    binary: Path | None = None,
) -> dict[str, float]:
    """One server under load: by hey when ``binary`` is given, else by the Python client."""
    sys.path.insert(0, str(REPO / "hack"))
    from controlplane.pki import CertificateAuthority

    with tempfile.TemporaryDirectory() as tmp:
        ca = CertificateAuthority.create("bench-ca")
        ca_file = Path(tmp) / "ca.crt"
        ca_file.write_bytes(ca.cert_pem)
        cert, key = Path(tmp) / "tls.crt", Path(tmp) / "tls.key"
        ca.issue_serving().write(cert, key)
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        ready = multiprocessing.Event()
        server = multiprocessing.Process(
            target=target, args=(port, str(cert), str(key), ready), daemon=True
        )
        server.start()
        if not ready.wait(20):
            raise SystemExit("webhook server did not start")
        if binary is not None:
            _check_answers(port, str(ca_file), kind)
            _hey_load(binary, port, 1000, connections, kind, Path(tmp))  # warm-up
            outcome = _hey_load(binary, port, requests, connections, kind, Path(tmp))
        else:
            outcome = _python_load(port, str(ca_file), requests, connections, kind)
        server.terminate()
        server.join(10)
    latencies = sorted(outcome["latencies"])

    def pct(p: float) -> float:
        return latencies[min(len(latencies) - 1, int(p * len(latencies)))] * 1000

    return {
        "requests": float(len(latencies)),
        "rps": len(latencies) / outcome["elapsed"],
        "p50": pct(0.50),
        "p90": pct(0.90),
        "p99": pct(0.99),
        "max": latencies[-1] * 1000,
        "mean": statistics.fmean(latencies) * 1000,
        "errors": float(outcome["errors"]),
    }


def _python_load(port: int, ca: str, requests: int, connections: int, kind: str) -> dict[str, Any]:
    results: Any = multiprocessing.Queue()
    warm = multiprocessing.Process(target=_load, args=(port, ca, 500, connections, results, kind))
    warm.start()
    results.get(timeout=120)
    warm.join()
    load = multiprocessing.Process(
        target=_load, args=(port, ca, requests, connections, results, kind)
    )
    load.start()
    outcome: dict[str, Any] = results.get(timeout=600)
    load.join()
    return outcome


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--connections", type=int, default=32)
    args = parser.parse_args()
    print(
        f"[bench] webhooks: {args.requests:,} Job reviews over {args.connections} keep-alive"
        " HTTPS connections",
        file=sys.stderr,
    )
    binary = hey()
    client = f"hey {HEY[1]}" if binary else "the Python client (no Go toolchain)"
    r = run(args.requests, args.connections, binary=binary)
    floor = run(args.requests, args.connections, _bare_server, binary=binary)
    print("server  reviews  conns |  reviews/s   p50 ms   p90 ms   p99 ms   max ms  errors")
    print("-" * 80)
    for label, row in (("sluice", r), ("floor", floor)):
        print(
            f"{label:<6} {int(row['requests']):>8,} {args.connections:>6} | {row['rps']:>10,.0f}"
            f" {row['p50']:>8.2f} {row['p90']:>8.2f} {row['p99']:>8.2f} {row['max']:>8.2f}"
            f" {int(row['errors']):>7}"
        )
    print(
        f"\nsluice / floor: {r['rps'] / floor['rps']:.2f}x the throughput,"
        f" {r['p99'] / floor['p99']:.2f}x the p99"
        " (floor: a bare aiohttp server that only parses the review);"
        f" load from {client}"
    )
    met = r["rps"] >= TARGET_RPS and r["p99"] <= TARGET_P99_MS and r["errors"] == 0
    print(
        f"\ntarget: >= {TARGET_RPS:,} reviews/s, p99 <= {TARGET_P99_MS:g} ms, 0 errors:"
        f" {'met' if met else 'NOT met'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
