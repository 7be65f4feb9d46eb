# One image for both components: `sluice operator run` and `sluice webhooks serve`.
# Build: docker build -t sluice:0.1.0 .
FROM python:3.11.11-slim-bookworm AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY sluice ./sluice
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM python:3.11.11-slim-bookworm
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HOME=/tmp
COPY --from=build /wheels /wheels
# Only the wheels built above (no index), then pip itself goes: nothing in the image can build
# or fetch packages. The kubernetes client's asyncio copy (half its size) is never imported.
RUN pip install --no-index /wheels/*.whl && rm -rf /wheels \
    && python -c "import kubernetes, pathlib, shutil; \
        shutil.rmtree(pathlib.Path(kubernetes.__file__).parent / 'aio', ignore_errors=True)" \
    && python -m pip uninstall --yes pip setuptools wheel \
    && groupadd --gid 65532 sluice \
    && useradd --uid 65532 --gid 65532 --no-create-home --shell /usr/sbin/nologin sluice
# Nothing is written outside /tmp, so the root filesystem can be mounted read-only.
WORKDIR /tmp
USER 65532:65532
EXPOSE 8443 8080 9090
ENTRYPOINT ["sluice"]
CMD ["--help"]
