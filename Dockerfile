# FaithJudge REST service: `faithjudge serve` on port 8000, data (SQLite job store, response
# cache, hashed API keys) in the /var/lib/faithjudge volume.
#
#   docker build -t faithjudge .
#   docker run -p 8000:8000 -e FAITHJUDGE_API_KEYS='{"<key>": "<tenant>"}' faithjudge
#
# Keys: FAITHJUDGE_API_KEYS (JSON {"KEY": "TENANT"}) or a mounted keys file of hashes
# (FAITHJUDGE_API_KEYS_FILE, written by `faithjudge keys create`). Without any key the service
# refuses to listen beyond loopback. PostgreSQL: set FAITHJUDGE_DATABASE_URL (see compose.yaml).

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# ---------------------------------------------------------------- builder: a venv with the wheel
FROM ${PYTHON_IMAGE} AS builder

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
WORKDIR /src

# Dependencies first (exact pins from constraints.txt), so a code change reuses this layer.
COPY pyproject.toml constraints.txt ./
RUN python -m pip install pip==26.3 \
 && python -c "import tomllib; p = tomllib.load(open('pyproject.toml', 'rb'))['project']; \
print('\n'.join(p['dependencies'] + p['optional-dependencies']['postgres']))" > requirements.txt \
 && python -m pip install -c constraints.txt -r requirements.txt

COPY README.md ./
COPY service ./service
COPY clients ./clients
COPY schemas ./schemas
COPY prompts ./prompts
COPY knowledge_base ./knowledge_base
# Smoke test of the installed wheel (the packages faithjudge and faithjudge_client): one line
# scored offline needs every bundled asset.
RUN python -m pip install --no-deps . \
 && faithjudge version \
 && python -c "import faithjudge_client" \
 && printf '%s\n' '{"question": "Is there a pleural effusion on the left? (yes or no)", "ground_truth": "yes", "cot": "The left costophrenic angle is blunted. <answer>yes</answer>"}' > /tmp/smoke.jsonl \
 && faithjudge score /tmp/smoke.jsonl -o /tmp/smoke.out --no-cache --data-dir /tmp/smoke --no-progress \
 && rm -rf /tmp/smoke /tmp/smoke.jsonl /tmp/smoke.out

# ---------------------------------------------------------------- runtime: slim, non-root
FROM ${PYTHON_IMAGE} AS runtime

LABEL org.opencontainers.image.title="FaithJudge" \
      org.opencontainers.image.description="Verified faithfulness scores for chain-of-thought explanations of medical VLMs" \
      org.opencontainers.image.licenses="Apache-2.0"

RUN groupadd --system --gid 10001 faithjudge \
 && useradd --system --uid 10001 --gid faithjudge --home-dir /var/lib/faithjudge \
      --shell /usr/sbin/nologin faithjudge \
 && mkdir -p /var/lib/faithjudge \
 && chown faithjudge:faithjudge /var/lib/faithjudge

COPY --from=builder /opt/venv /opt/venv

ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    FAITHJUDGE_DATA_DIR=/var/lib/faithjudge \
    FAITHJUDGE_PORT=8000

USER 10001:10001
WORKDIR /var/lib/faithjudge
VOLUME ["/var/lib/faithjudge"]
EXPOSE 8000

# /healthz answers while the process is alive; python is already there, curl is not.
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
  CMD ["python", "-c", "import os, sys, urllib.request; port = os.environ.get('FAITHJUDGE_PORT', '8000'); sys.exit(0 if urllib.request.urlopen(f'http://127.0.0.1:{port}/healthz', timeout=4).status == 200 else 1)"]

ENTRYPOINT ["faithjudge"]
CMD ["serve", "--host", "0.0.0.0"]
