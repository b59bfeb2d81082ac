# syntax=docker/dockerfile:1
# The reference relay node and its pressure feed: one image with the whole `sluice` CLI.
# Compose runs the relay (`sluice relay ...`) and its feed (`sluice feed ...`) as two services
# from this image rather than both in one container: the feed reads the relay's memory and
# backlog over HTTP (`--relay http://relay-a:7001`, its /metrics and /stats), so it needs no
# shared PID namespace or cgroup, and one process per container keeps each one's logs, health
# check and restarts apart, as examples/run-local.sh runs them as two processes. The same
# image also runs `sluice valkey create-cluster` for the Compose cluster.
# Build from the repository root:  docker build -f docker/relay.Dockerfile -t sluice-relay .

FROM node:20-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json ./
COPY src ./src
RUN npm run build

FROM node:20-bookworm-slim AS runtime
ENV NODE_ENV=production
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/dist/src ./dist/src
# The relay keeps its append-only data file under .run/relay/<node id> (the default
# --data-dir); the unprivileged user owns it.
RUN mkdir -p /app/.run && chown node:node /app/.run
USER node
# The compose files' ports: relays (Nostr WebSocket, HTTP, /metrics) on 7001 and 7002, the
# feeds' /metrics on 9101 and 9102. Each command chooses its own with --port.
EXPOSE 7001 7002 9101 9102
ENTRYPOINT ["node", "dist/src/cli.js"]
CMD ["relay", "--help"]
