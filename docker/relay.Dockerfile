# syntax=docker/dockerfile:1
# The reference relay node and its pressure feed: one image with the whole `sluice` CLI.
# Compose runs the relay (`sluice relay ...`) and its feed (`sluice feed ...`) as two services
# from this image rather than both in one container: the feed reads the relay's memory and
# backlog over HTTP (`--relay http://relay-a:7001`, its /metrics and /stats), so it needs no
# shared PID namespace or cgroup, and one process per container keeps each one's logs, health
# check and restarts apart, as examples/run-local.sh runs them as two processes. The same
# image also runs `sluice valkey create-cluster` for the Compose cluster.
# Build from the repository root:  docker build -f docker/relay.Dockerfile -t sluice-relay .

# Built from the npm package, as an operator installs it: `npm pack` (its prepack builds
# dist/), then the tarball installed with production dependencies only.
FROM node:20-bookworm-slim AS build
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json README.md ./
COPY src ./src
COPY docs/CONFIGURATION.md ./docs/
COPY examples/gateway.yaml ./examples/
RUN npm pack --pack-destination /tmp && mv /tmp/sluice-*.tgz /tmp/sluice.tgz

FROM node:20-bookworm-slim AS runtime
ENV NODE_ENV=production SLUICE_RUN_DIR=/app/.run
WORKDIR /app
COPY --from=build /tmp/sluice.tgz /tmp/sluice.tgz
RUN npm install --omit=dev --no-audit --no-fund /tmp/sluice.tgz \
  && rm /tmp/sluice.tgz && npm cache clean --force
# The relay keeps its append-only data file under .run/relay/<node id> (the default
# --data-dir); the unprivileged user owns it.
RUN mkdir -p /app/.run && chown node:node /app/.run
USER node
# The compose files' ports: relays (Nostr WebSocket, HTTP, /metrics) on 7001 and 7002, the
# feeds' /metrics on 9101 and 9102. Each command chooses its own with --port.
EXPOSE 7001 7002 9101 9102
ENTRYPOINT ["node", "node_modules/sluice/dist/src/cli.js"]
CMD ["relay", "--help"]
