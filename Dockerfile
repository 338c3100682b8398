# The curaflow application image: the API (`curaflow api`) and the worker (`python worker.py`).
FROM python:3.11-slim

ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /app
COPY pyproject.toml README.md worker.py ./
COPY curaflow ./curaflow
COPY workflows ./workflows
COPY activities ./activities
COPY bench ./bench
RUN pip install . \
    && useradd --system --uid 10001 --home-dir /var/lib/curaflow curaflow \
    && mkdir -p /var/lib/curaflow /etc/curaflow \
    && chown -R curaflow /var/lib/curaflow

USER curaflow
# docker compose build --build-arg CURAFLOW_COMMIT=$(git rev-parse --short=12 HEAD)
ARG CURAFLOW_COMMIT=unknown
ENV CURAFLOW_STATE_DIR=/var/lib/curaflow CURAFLOW_COMMIT=${CURAFLOW_COMMIT}
VOLUME ["/var/lib/curaflow"]
EXPOSE 8080 9090 9091
CMD ["python", "worker.py"]
