# Image for the API, the worker and the console (the same code; compose picks the command).
FROM node:24-bookworm-slim AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund

# The console's front end, built with the dev dependencies (Vite), copied into the image below.
FROM node:24-bookworm-slim AS web
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY web/ui ./web/ui
COPY tools/scripts/build-web.ts ./tools/scripts/build-web.ts
RUN npx tsx tools/scripts/build-web.ts --force

FROM node:24-bookworm-slim
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
COPY --from=web /app/web/ui/dist ./web/ui/dist
USER node
EXPOSE 8080 3000
CMD ["npm", "run", "api"]
