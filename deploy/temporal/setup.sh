#!/bin/sh
# Temporal's own server for deploy/compose.temporal-server.yml, run in temporalio/admin-tools:
#   setup.sh schema      create Temporal's two databases and bring their schemas up to date
#   setup.sh namespace   create the namespace and register Lenstack's search attributes
# Both are idempotent: run again on every `up`, they change nothing that is already there.
set -eu

sql() {
  temporal-sql-tool --plugin postgres12 --ep "$POSTGRES_HOST" -p 5432 -u "$SQL_USER" --pw "$SQL_PASSWORD" "$@"
}

case "${1:-}" in
  schema)
    for db in temporal temporal_visibility; do
      dir=temporal
      [ "$db" = temporal_visibility ] && dir=visibility
      sql --db "$db" create || true # already there after the first run
      sql --db "$db" setup-schema -v 0.0 || true # the version table, once
      sql --db "$db" update-schema -d "/etc/temporal/schema/postgresql/v12/$dir/versioned"
    done
    ;;
  namespace)
    ns="${TEMPORAL_NAMESPACE:-default}"
    temporal operator cluster health --address "$TEMPORAL_ADDRESS"
    temporal operator namespace describe --address "$TEMPORAL_ADDRESS" -n "$ns" >/dev/null 2>&1 ||
      temporal operator namespace create --address "$TEMPORAL_ADDRESS" -n "$ns" --retention 30d
    # The same list as workflows/search-attributes.ts (test/operations/compose.test.ts compares them).
    for attribute in LenstackUserId=Keyword LenstackRequestId=Keyword LenstackStack=Keyword LenstackImageCount=Int LenstackBatchId=Keyword; do
      name="${attribute%%=*}"
      type="${attribute#*=}"
      temporal operator search-attribute list --address "$TEMPORAL_ADDRESS" -n "$ns" | grep -q "^ *$name " ||
        temporal operator search-attribute create --address "$TEMPORAL_ADDRESS" -n "$ns" --name "$name" --type "$type"
    done
    ;;
  *)
    echo "usage: setup.sh schema|namespace" >&2
    exit 2
    ;;
esac
