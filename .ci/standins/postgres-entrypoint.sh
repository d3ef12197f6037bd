#!/bin/sh
# The part of the official postgres image's entrypoint that deploy/compose.yaml uses: on an
# empty data folder, a cluster whose superuser is $POSTGRES_USER with $POSTGRES_PASSWORD (TCP
# connections need it: scram-sha-256) and a database $POSTGRES_DB; then the server in the
# foreground, listening on every address of the container.
set -eu
PGDATA=${PGDATA:-/var/lib/postgresql/data}
bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
if [ ! -s "$PGDATA/PG_VERSION" ]; then
    password_file=$(mktemp)
    printf '%s\n' "$POSTGRES_PASSWORD" >"$password_file"
    "$bin/initdb" --pgdata="$PGDATA" --username="$POSTGRES_USER" --pwfile="$password_file" \
        --auth-local=trust --auth-host=scram-sha-256 --encoding=UTF8 >/dev/null
    rm -f "$password_file"
    echo "host all all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
    "$bin/pg_ctl" start --pgdata="$PGDATA" --wait -o "-c listen_addresses='' -k /tmp" >/dev/null
    "$bin/createdb" --host=/tmp --username="$POSTGRES_USER" "$POSTGRES_DB"
    "$bin/pg_ctl" stop --pgdata="$PGDATA" --wait >/dev/null
fi
exec "$bin/postgres" -D "$PGDATA" -c listen_addresses='*' -k /tmp
