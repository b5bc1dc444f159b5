# Image for the API and the worker (the same code; compose picks the command).
FROM node:20-bookworm-slim AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund

FROM node:20-bookworm-slim
# exiftool-vendored runs the ExifTool it bundles, a Perl program that needs more than perl-base.
RUN apt-get update \
  && apt-get install -y --no-install-recommends perl ca-certificates \
  && rm -rf /var/lib/apt/lists/*
WORKDIR /app
ENV NODE_ENV=production \
    BLOB_DIR=/data/blobs
# The blob volume is shared by api and worker; a new named volume takes this directory's owner.
RUN mkdir -p /data/blobs && chown -R node:node /data
COPY --from=deps /app/node_modules ./node_modules
COPY . .
USER node
EXPOSE 8080
CMD ["npm", "run", "api"]
