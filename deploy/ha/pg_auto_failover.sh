#!/usr/bin/env bash
# Creates one node of the pg_auto_failover formation that ediwatch
# replicas share (README, Replicated PostgreSQL): a monitor and three
# PostgreSQL nodes, each on a host of its own. Run as the postgres user:
#
#   PGDATA=/var/lib/postgresql/15/monitor NODE_HOST=10.0.0.10 deploy/ha/pg_auto_failover.sh monitor
#   PGDATA=/var/lib/postgresql/15/ediwatch NODE_HOST=10.0.0.21 \
#     MONITOR_URI='postgres://autoctl_node@10.0.0.10:5432/pg_auto_failover?sslmode=require' \
#     deploy/ha/pg_auto_failover.sh node db1            # then db2 on .22, db3 on .23
#
# and keep each running with `pg_autoctl run --pgdata "$PGDATA"` (a unit
# for it: `pg_autoctl show systemd --pgdata "$PGDATA"`). The first node
# becomes the primary, the next two its standbys, cloned from it.
#
# Every node takes part in the replication quorum, and the formation
# keeps number_sync_standbys at 0: with two standbys up, the primary's
# synchronous_standby_names is 'ANY 1 (pgautofailover_standby_2,
# pgautofailover_standby_3)', so a commit returns once either standby
# has flushed it and losing one node does not stop writes. With both
# standbys gone the primary goes on alone (the monitor's wait_primary
# state) rather than stop; with a standby lost the monitor promotes only
# a standby whose WAL position it has read (report_lsn), the most
# advanced one. store.wait_for_standbys: auto in ediwatch holds a file's
# delete until every standby streaming has flushed its commit.
#
# Settings from the environment: PGDATA, NODE_HOST (the address the
# other nodes and ediwatch reach this one at), PGPORT (default 5432),
# MONITOR_URI (a node's), PG_AUTH (default scram-sha-256; set the
# passwords with pg_autoctl's --pg-hba-lan and ~/.pgpass, see
# pg_autoctl create postgres --help) and PG_SSL (default
# --ssl-self-signed; --ssl-ca-file FILE --server-cert FILE --server-key
# FILE with your CA). The test of this example (cmd/ediwatch,
# TestAutoFailoverQuorum) runs it on loopback with trust and --no-ssl.
set -euo pipefail
role=${1:?monitor or node NAME}
: "${PGDATA:?}" "${NODE_HOST:?}"
read -r -a ssl <<<"${PG_SSL:---ssl-self-signed}"
common=(--pgdata "$PGDATA" --pgport "${PGPORT:-5432}" --hostname "$NODE_HOST" --auth "${PG_AUTH:-scram-sha-256}" "${ssl[@]}")
case "$role" in
monitor)
	exec pg_autoctl create monitor "${common[@]}"
	;;
node)
	name=${2:?node NAME}
	: "${MONITOR_URI:?}"
	exec pg_autoctl create postgres "${common[@]}" --name "$name" --monitor "$MONITOR_URI" \
		--replication-quorum true --candidate-priority 50
	;;
*)
	echo "usage: $0 monitor | node NAME" >&2
	exit 2
	;;
esac
