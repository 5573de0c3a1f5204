#!/usr/bin/env bash
# Creates one node of the pg_auto_failover formation that ediwatch
# replicas share (README, Replicated PostgreSQL): a monitor and three
# PostgreSQL nodes, each on a host of its own. Run as the postgres user,
# with your CA's files (ediwatch's DSN verifies the server:
# sslmode=verify-full):
#
#   export PG_SSL='--ssl-ca-file /etc/ssl/ca.pem --server-cert /etc/ssl/db.pem --server-key /etc/ssl/db.key'
#   PGDATA=/var/lib/postgresql/15/monitor NODE_HOST=10.0.0.10 deploy/ha/pg_auto_failover.sh monitor
#   PGDATA=/var/lib/postgresql/15/ediwatch NODE_HOST=10.0.0.21 \
#     MONITOR_URI='postgres://autoctl_node@10.0.0.10:5432/pg_auto_failover?sslmode=verify-full' \
#     deploy/ha/pg_auto_failover.sh node db1 --dbname ediwatch    # then db2 on .22, db3 on .23
#
# Arguments after the role (and a node's name) go to pg_autoctl create
# as they are (--dbname, --listen, --pg-hba-lan, --skip-pg-hba). Keep each
# node running with `pg_autoctl run --pgdata "$PGDATA"` (a unit for it:
# `pg_autoctl show systemd --pgdata "$PGDATA"`). The first node becomes
# the primary, the next two its standbys, cloned from it.
#
# Every node takes part in the replication quorum, and the formation
# keeps number_sync_standbys at 0 (a new monitor's default): with two
# standbys up, the primary's synchronous_standby_names is
# 'ANY 1 (pgautofailover_standby_2, pgautofailover_standby_3)', so a
# commit returns once either standby has flushed it and losing a standby
# does not stop writes. With both standbys gone the primary goes on alone
# (the monitor's wait_primary state) rather than stop. With the primary
# lost, the monitor reads the standbys' WAL positions (report_lsn) and
# promotes the one furthest along; writes stop until then (about 50 s
# with the monitor's default timeouts). store.wait_for_standbys: auto in
# ediwatch holds a file's delete until every standby streaming has
# flushed its commit.
#
# With PG_AUTH=scram-sha-256 (the default) the roles need passwords, as
# pg_auto_failover's security documentation says: autoctl_node's on the
# monitor (in MONITOR_URI or ~/.pgpass), and the replication password on
# every node (`pg_autoctl config set replication.password`). ediwatch's
# own role is made once on the primary, and reaches every node by the
# pg_hba.conf lines you add for its hosts:
#   CREATE ROLE ediwatch LOGIN PASSWORD '...'; GRANT pg_monitor TO ediwatch;
#   ALTER DATABASE ediwatch OWNER TO ediwatch;
#
# Settings from the environment: PGDATA, NODE_HOST (the address the
# other nodes and ediwatch reach this one at), PGPORT (default 5432),
# MONITOR_URI (a node's), PG_AUTH (default scram-sha-256) and PG_SSL
# (required: your CA's files as above; --ssl-self-signed encrypts without
# proving the server, and then needs sslmode=require in ediwatch's DSN).
# The test of this example (cmd/ediwatch, TestAutoFailoverQuorum) runs it
# on loopback with trust and --no-ssl.
set -euo pipefail
role=${1:?monitor or node NAME}
: "${PGDATA:?}" "${NODE_HOST:?}" "${PG_SSL:?your CA files (--ssl-ca-file F --server-cert F --server-key F)}"
read -r -a ssl <<<"$PG_SSL"
common=(--pgdata "$PGDATA" --pgport "${PGPORT:-5432}" --hostname "$NODE_HOST" --auth "${PG_AUTH:-scram-sha-256}" "${ssl[@]}")
case "$role" in
monitor)
	exec pg_autoctl create monitor "${common[@]}" "${@:2}"
	;;
node)
	name=${2:?node NAME}
	: "${MONITOR_URI:?}"
	exec pg_autoctl create postgres "${common[@]}" --name "$name" --monitor "$MONITOR_URI" \
		--replication-quorum true --candidate-priority 50 "${@:3}"
	;;
*)
	echo "usage: $0 monitor [pg_autoctl options] | node NAME [pg_autoctl options]" >&2
	exit 2
	;;
esac
