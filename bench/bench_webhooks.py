"""Webhook load benchmark: realistic Job AdmissionReviews over HTTPS with keep-alive.

One server process (the real aiohttp app and handlers, its Queue cache fed directly, so the
numbers are the server's and not an API server's) and a separate load-generator process with
a fixed number of concurrent keep-alive connections. Each connection sends the pair the API
server sends for a tenant's ``kubectl create job``: /mutate/jobs, then /validate/jobs.
Bounded in requests and time; loopback only.

Beside it, the floor measured in the same run: a bare aiohttp server on the same TLS setup
that only parses each review and allows it, under the same load; the ratio of the two is
what sluice's rules cost, whatever the machine's speed.

Run: ``.venv/bin/python -m bench.bench_webhooks [--requests N] [--connections C]``.
Targets: >= 2,000 reviews/s, p99 <= 10 ms, zero errors.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import ssl
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
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


def run(
    requests: int, connections: int, target: Any = _server, kind: str = "jobs"
) -> dict[str, float]:
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
        results: Any = multiprocessing.Queue()
        warm = multiprocessing.Process(
            target=_load, args=(port, str(ca_file), 500, connections, results, kind)
        )
        warm.start()
        results.get(timeout=120)
        warm.join()
        load = multiprocessing.Process(
            target=_load, args=(port, str(ca_file), requests, connections, results, kind)
        )
        load.start()
        outcome = results.get(timeout=600)
        load.join()
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--connections", type=int, default=8)
    args = parser.parse_args()
    print(
        f"[bench] webhooks: {args.requests:,} Job reviews over {args.connections} keep-alive"
        " HTTPS connections",
        file=sys.stderr,
    )
    r = run(args.requests, args.connections)
    floor = run(args.requests, args.connections, _bare_server)
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
        " (floor: a bare aiohttp server that only parses the review)"
    )
    met = r["rps"] >= TARGET_RPS and r["p99"] <= TARGET_P99_MS and r["errors"] == 0
    print(
        f"\ntarget: >= {TARGET_RPS:,} reviews/s, p99 <= {TARGET_P99_MS:g} ms, 0 errors:"
        f" {'met' if met else 'NOT met'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
