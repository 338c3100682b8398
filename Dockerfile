FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md worker.py ./
COPY curaflow ./curaflow
COPY workflows ./workflows
COPY activities ./activities
COPY bench ./bench
RUN pip install --no-cache-dir .
ENV CURAFLOW_STATE_DIR=/var/lib/curaflow
CMD ["python", "worker.py"]
