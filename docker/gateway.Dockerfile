# syntax=docker/dockerfile:1
# The sluice gateway: `sluice gateway --config /etc/sluice/gateway.yaml`, the same command as
# on a bare machine (examples/run-local.sh). Mount a configuration file there; see
# docker/config/gateway.yaml and docker/README.md. Build from the repository root:
#   docker build -f docker/gateway.Dockerfile -t sluice-gateway .

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
# Run state (.run) is the only place the process writes; it belongs to the unprivileged user.
RUN mkdir -p /app/.run && chown node:node /app/.run
USER node
# 8080: clients (HTTP and Nostr WebSocket); 8081: admin, /metrics, /healthz, /readyz.
EXPOSE 8080 8081
ENTRYPOINT ["node", "node_modules/sluice/dist/src/cli.js"]
CMD ["gateway", "--config", "/etc/sluice/gateway.yaml"]
