# Chorus service image: python:3.11-slim, non-root, numba kernels compiled at build time.
#   docker build -t chorus .
#   docker run -p 8000:8000 -v chorus-data:/data chorus        # embedded SQLite store in /data
#   docker compose up -d                                        # with Redis (docker-compose.yml)
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    NUMBA_CACHE_DIR=/opt/chorus/numba-cache \
    CHORUS_DATA_DIR=/data

RUN groupadd --system --gid 10001 chorus \
    && useradd --system --uid 10001 --gid chorus --home-dir /opt/chorus \
       --shell /usr/sbin/nologin chorus \
    && mkdir -p /opt/chorus/numba-cache /data \
    && chown -R chorus:chorus /opt/chorus /data

WORKDIR /opt/chorus/src

# Dependencies first (a layer that survives source edits): install the project's declared
# dependencies from pyproject.toml with empty packages, then drop the placeholder.
COPY pyproject.toml README.md ./
RUN mkdir -p app ensembles learners \
    && touch app/__init__.py ensembles/__init__.py learners/__init__.py \
    && pip install . \
    && pip uninstall -y chorus \
    && rm -rf app ensembles learners build *.egg-info

COPY learners ./learners
COPY ensembles ./ensembles
COPY app ./app
RUN pip install --no-deps . && rm -rf build *.egg-info

# Compile every engine kernel once, as the runtime user, into NUMBA_CACHE_DIR: the first
# request of a fresh container does not pay the JIT.
USER chorus
RUN chorus warmup

VOLUME ["/data"]
EXPOSE 8000
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import sys, urllib.request; sys.exit(urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=2).status != 200)"]
CMD ["chorus", "serve", "--host", "0.0.0.0", "--port", "8000"]
