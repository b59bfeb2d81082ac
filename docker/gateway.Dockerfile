# syntax=docker/dockerfile:1
# The sluice gateway: `sluice gateway --config /etc/sluice/gateway.yaml`, the same command as
# on a bare machine (examples/run-local.sh). Mount a configuration file there; see
# docker/config/gateway.yaml and docker/README.md. Build from the repository root:
#   docker build -f docker/gateway.Dockerfile -t sluice-gateway .

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
# Run state (.run) is the only place the process writes; it belongs to the unprivileged user.
RUN mkdir -p /app/.run && chown node:node /app/.run
USER node
# 8080: clients (HTTP and Nostr WebSocket); 8081: admin, /metrics, /healthz, /readyz.
EXPOSE 8080 8081
ENTRYPOINT ["node", "dist/src/cli.js"]
CMD ["gateway", "--config", "/etc/sluice/gateway.yaml"]
