# Shared by scripts/test.sh and bench/*: installs what is missing and starts
# a throwaway PostgreSQL with a PgBouncer in front, a second PostgreSQL with
# a streaming standby, and an OpenSSH sshd on free loopback ports in a
# temporary directory, exporting their coordinates (EDIWATCH_TEST_*), and
# stops them on exit. Source it from bash after setting PG_FSYNC (on|off).
log() { printf 'test.sh: %s\n' "$*" >&2; }

as_root() {
	if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

apt_updated=
apt_install() {
	if [ -z "$apt_updated" ]; then
		as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
		apt_updated=1
	fi
	# Package scripts must not start the system's own services.
	local policy=/usr/sbin/policy-rc.d created=
	if [ ! -e "$policy" ]; then
		printf '#!/bin/sh\nexit 101\n' | as_root tee "$policy" >/dev/null
		as_root chmod +x "$policy"
		created=1
	fi
	as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
	[ -z "$created" ] || as_root rm -f "$policy"
}

pg_bin=
find_pg() {
	local d
	for d in /usr/lib/postgresql/*/bin; do
		[ -x "$d/initdb" ] && pg_bin=$d
	done
	[ -n "$pg_bin" ]
}

find_pg || { log "installing postgresql"; apt_install postgresql; find_pg; }
[ -x /usr/sbin/sshd ] || { log "installing openssh-server"; apt_install openssh-server; }
# PgBouncer, in transaction mode in front of the PostgreSQL below: the
# store's conformance suite runs through it once.
command -v pgbouncer >/dev/null || [ -x /usr/sbin/pgbouncer ] || { log "installing pgbouncer"; apt_install pgbouncer; }
pgbouncer_bin=$(command -v pgbouncer || echo /usr/sbin/pgbouncer)
# Patroni's validator checks the HA example (deploy/ha); never started.
command -v patroni >/dev/null || { log "installing patroni"; apt_install patroni; }
export EDIWATCH_PATRONI="$(command -v patroni)"
# pg_auto_failover (its pg_autoctl and the extension for the server
# above): the HA example (deploy/ha/pg_auto_failover.sh) is created and
# failed over for real by TestAutoFailoverQuorum.
if ! command -v pg_autoctl >/dev/null || [ ! -e "$pg_bin/../lib/pgautofailover.so" ]; then
	log "installing pg_auto_failover"
	apt_install pg-auto-failover-cli "postgresql-$(basename "$(dirname "$pg_bin")")-auto-failover"
fi
pg_autoctl=$(command -v pg_autoctl) || { log "pg_autoctl is missing after its install"; exit 1; }
export EDIWATCH_TEST_PG_AUTOCTL="$pg_autoctl"
# gpg and gpgconf make the OpenPGP keys and messages of the decrypt tests.
command -v gpg >/dev/null && command -v gpgconf >/dev/null || { log "installing gnupg"; apt_install gnupg; }
# systemd-analyze lints the shipped unit (deploy/systemd); the package is
# installed, never started.
command -v systemd-analyze >/dev/null || { log "installing systemd"; apt_install systemd; }

# Headless Chromium drives the console's browser tests (internal/console).
chromium=$(command -v chromium || true)
[ -n "$chromium" ] || { log "installing chromium"; apt_install chromium; chromium=$(command -v chromium); }
export EDIWATCH_TEST_CHROMIUM="$chromium"

# promtool, from Debian's prometheus package, unpacked without installing
# the service.
promtool=$(command -v promtool || true)
if [ -z "$promtool" ]; then
	cache="${XDG_CACHE_HOME:-$HOME/.cache}/ediwatch/prometheus"
	if [ ! -x "$cache/usr/bin/promtool" ]; then
		log "fetching promtool (Debian package prometheus)"
		[ -n "$apt_updated" ] || { as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq; apt_updated=1; }
		mkdir -p "$cache"
		(cd "$cache" && apt-get download -qq -o APT::Sandbox::User=root prometheus >/dev/null && dpkg-deb -x prometheus_*.deb . && rm -f prometheus_*.deb)
	fi
	promtool="$cache/usr/bin/promtool"
fi
export EDIWATCH_PROMTOOL="$promtool"

free_port() {
	local p
	for p in $(shuf -i 20000-60000 -n 50); do
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return
		fi
	done
	log "no free port found"
	return 1
}

tmp=$(mktemp -d /tmp/ediwatch-test.XXXXXX)
chmod 755 "$tmp"
pg_started= ha_started= ha_standby_started= pgbouncer_started= sshd_pid=
cleanup() {
	local rc=$?
	if [ "$rc" -ne 0 ]; then
		# What the services said, for a failed run: an sshd or a
		# PostgreSQL that stopped answering says why here.
		for f in "$tmp/sshd.log" "$tmp/pgsock/pg.log" "$tmp/pgsock/ha.log" "$tmp/pgsock/ha-standby.log"; do
			[ -s "$f" ] && { log "last lines of $f:"; tail -n 20 "$f" >&2; }
		done
		if [ -n "$sshd_pid" ] && ! kill -0 "$sshd_pid" 2>/dev/null; then
			log "sshd (pid $sshd_pid) had exited before the end"
		fi
	fi
	if [ -n "$pg_started" ]; then
		runuser -u postgres -- "$pg_bin/pg_ctl" -D "$tmp/pg" -m immediate stop >/dev/null 2>&1 || true
	fi
	if [ -n "$pgbouncer_started" ] && [ -f "$tmp/pgbouncer/pgbouncer.pid" ]; then
		kill "$(cat "$tmp/pgbouncer/pgbouncer.pid")" 2>/dev/null || true
	fi
	if [ -n "$ha_standby_started" ]; then
		runuser -u postgres -- "$pg_bin/pg_ctl" -D "$tmp/ha-standby" -m immediate stop >/dev/null 2>&1 || true
	fi
	if [ -n "$ha_started" ]; then
		# A test may have left its WAL sender stopped: it ends with the server.
		runuser -u postgres -- "$pg_bin/pg_ctl" -D "$tmp/ha" -m immediate stop >/dev/null 2>&1 || true
	fi
	if [ -n "$sshd_pid" ]; then
		kill "$sshd_pid" 2>/dev/null || true
		wait "$sshd_pid" 2>/dev/null || true
	fi
	# A chaos run may have restarted sshd under another pid.
	if [ -f "$tmp/ssh/sshd.pid" ]; then
		kill "$(cat "$tmp/ssh/sshd.pid")" 2>/dev/null || true
	fi
	rm -rf "$tmp"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# PostgreSQL refuses to run as root: its directory belongs to postgres.
pg_port=$(free_port)
mkdir -p "$tmp/pg" "$tmp/pgsock"
chown postgres: "$tmp/pg" "$tmp/pgsock"
runuser -u postgres -- "$pg_bin/initdb" -D "$tmp/pg" --no-sync -A trust -U postgres -E UTF8 >"$tmp/initdb.log" 2>&1 ||
	{ cat "$tmp/initdb.log" >&2; exit 1; }
runuser -u postgres -- "$pg_bin/pg_ctl" -D "$tmp/pg" -l "$tmp/pgsock/pg.log" -w -t 30 start \
	-o "-c listen_addresses=127.0.0.1 -p $pg_port -k $tmp/pgsock -c max_connections=300 -c fsync=${PG_FSYNC:-on}" >/dev/null ||
	{ cat "$tmp/pgsock/pg.log" >&2; exit 1; }
pg_started=1
export EDIWATCH_TEST_POSTGRES="postgres://postgres@127.0.0.1:$pg_port/postgres?sslmode=disable"
log "postgres on 127.0.0.1:$pg_port"

# PgBouncer in transaction pooling mode, any database name passed to the
# same-named database of the server above; trust, as the server.
pgb_port=$(free_port)
mkdir -p "$tmp/pgbouncer"
printf '"postgres" ""\n' >"$tmp/pgbouncer/userlist.txt"
cat >"$tmp/pgbouncer/pgbouncer.ini" <<EOF
[databases]
* = host=127.0.0.1 port=$pg_port
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $pgb_port
unix_socket_dir =
auth_type = trust
auth_file = $tmp/pgbouncer/userlist.txt
pool_mode = transaction
max_client_conn = 2000
default_pool_size = 40
max_db_connections = 40
logfile = $tmp/pgbouncer/pgbouncer.log
pidfile = $tmp/pgbouncer/pgbouncer.pid
EOF
chown -R postgres: "$tmp/pgbouncer"
runuser -u postgres -- "$pgbouncer_bin" -d "$tmp/pgbouncer/pgbouncer.ini" ||
	{ cat "$tmp/pgbouncer/pgbouncer.log" >&2; exit 1; }
pgbouncer_started=1
export EDIWATCH_TEST_PGBOUNCER="127.0.0.1:$pgb_port"
log "pgbouncer (transaction mode) on 127.0.0.1:$pgb_port"

# A primary with one streaming standby (pg_basebackup -R), apart from the
# server above so that the tests that stall its replication stall no
# other test's.
ha_port=$(free_port)
mkdir -p "$tmp/ha" "$tmp/ha-standby"
chown postgres: "$tmp/ha" "$tmp/ha-standby"
chmod 700 "$tmp/ha-standby"
runuser -u postgres -- "$pg_bin/initdb" -D "$tmp/ha" --no-sync -A trust -U postgres -E UTF8 >"$tmp/initdb-ha.log" 2>&1 ||
	{ cat "$tmp/initdb-ha.log" >&2; exit 1; }
runuser -u postgres -- "$pg_bin/pg_ctl" -D "$tmp/ha" -l "$tmp/pgsock/ha.log" -w -t 30 start \
	-o "-c listen_addresses=127.0.0.1 -p $ha_port -k $tmp/pgsock -c max_connections=100 -c fsync=${PG_FSYNC:-on}" >/dev/null ||
	{ cat "$tmp/pgsock/ha.log" >&2; exit 1; }
ha_started=1
ha_standby_port=$(free_port)
runuser -u postgres -- "$pg_bin/pg_basebackup" -h 127.0.0.1 -p "$ha_port" -U postgres -D "$tmp/ha-standby" -R -X stream \
	>"$tmp/basebackup.log" 2>&1 || { cat "$tmp/basebackup.log" >&2; exit 1; }
runuser -u postgres -- "$pg_bin/pg_ctl" -D "$tmp/ha-standby" -l "$tmp/pgsock/ha-standby.log" -w -t 30 start \
	-o "-c listen_addresses=127.0.0.1 -p $ha_standby_port -k $tmp/pgsock -c max_connections=100 -c fsync=${PG_FSYNC:-on}" >/dev/null ||
	{ cat "$tmp/pgsock/ha-standby.log" >&2; exit 1; }
ha_standby_started=1
export EDIWATCH_TEST_POSTGRES_HA="postgres://postgres@127.0.0.1:$ha_port/postgres?sslmode=disable"
export EDIWATCH_TEST_POSTGRES_HA_STANDBY="postgres://postgres@127.0.0.1:$ha_standby_port/postgres?sslmode=disable"
log "postgres primary on 127.0.0.1:$ha_port, its standby on 127.0.0.1:$ha_standby_port"

# OpenSSH sshd serving SFTP to a dedicated user, key-only, with its own
# host key; the system sshd is not touched.
sftp_user=ediwatch-sftp
if ! getent passwd "$sftp_user" >/dev/null; then
	useradd --system --no-create-home --home-dir /nonexistent --shell /bin/sh "$sftp_user"
fi
usermod -p '*' "$sftp_user" # not locked (sshd refuses locked accounts), no password
mkdir -p "$tmp/ssh" "$tmp/drop" /run/sshd
ssh-keygen -q -t ed25519 -N '' -C ediwatch-test-host -f "$tmp/ssh/host_ed25519"
ssh-keygen -q -t ed25519 -N '' -C ediwatch-test-client -f "$tmp/ssh/client_ed25519"
cp "$tmp/ssh/client_ed25519.pub" "$tmp/ssh/authorized_keys"
chown "$sftp_user" "$tmp/drop"
chmod 777 "$tmp/drop"
# start_sshd starts sshd on a free port and waits until it listens; it
# fails, sshd's log shown, when sshd exits or does not listen within 5 s
# (the port taken meanwhile: tried again on another).
start_sshd() {
	ssh_port=$(free_port)
	# Two more ports of the same server whose SFTP is restricted as
	# partners restrict theirs: read-only (-R), and remove refused (-P).
	ssh_port_ro=$(free_port)
	ssh_port_noremove=$(free_port)
	: >"$tmp/ssh/known_hosts"
	for p in "$ssh_port" "$ssh_port_ro" "$ssh_port_noremove"; do
		printf '[127.0.0.1]:%s %s\n' "$p" "$(cut -d' ' -f1,2 "$tmp/ssh/host_ed25519.pub")" >>"$tmp/ssh/known_hosts"
	done
	cat >"$tmp/ssh/sshd_config" <<CONF
Port $ssh_port
Port $ssh_port_ro
Port $ssh_port_noremove
ListenAddress 127.0.0.1
HostKey $tmp/ssh/host_ed25519
PidFile $tmp/ssh/sshd.pid
AuthorizedKeysFile $tmp/ssh/authorized_keys
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
AllowUsers $sftp_user
MaxStartups 100:30:200
MaxSessions 100
Subsystem sftp internal-sftp
ForceCommand internal-sftp -d $tmp/drop
Match LocalPort $ssh_port_ro
	ForceCommand internal-sftp -R -d $tmp/drop
Match LocalPort $ssh_port_noremove
	ForceCommand internal-sftp -P remove -d $tmp/drop
CONF
	/usr/sbin/sshd -D -e -f "$tmp/ssh/sshd_config" 2>"$tmp/sshd.log" &
	sshd_pid=$!
	for _ in $(seq 50); do
		(exec 3<>"/dev/tcp/127.0.0.1/$ssh_port") 2>/dev/null && return 0
		kill -0 "$sshd_pid" 2>/dev/null || break
		sleep 0.1
	done
	log "sshd did not listen on 127.0.0.1:$ssh_port:"
	tail -n 20 "$tmp/sshd.log" >&2
	kill "$sshd_pid" 2>/dev/null || true
	wait "$sshd_pid" 2>/dev/null || true
	sshd_pid=
	return 1
}
start_sshd || start_sshd || start_sshd || { log "sshd would not start"; exit 1; }
export EDIWATCH_TEST_SSHD_ADDR="127.0.0.1:$ssh_port"
export EDIWATCH_TEST_SSHD_USER="$sftp_user"
export EDIWATCH_TEST_SSHD_KEY="$tmp/ssh/client_ed25519"
export EDIWATCH_TEST_SSHD_KNOWN_HOSTS="$tmp/ssh/known_hosts"
export EDIWATCH_TEST_SSHD_DROP="$tmp/drop"
export EDIWATCH_TEST_SSHD_ADDR_READONLY="127.0.0.1:$ssh_port_ro"
export EDIWATCH_TEST_SSHD_ADDR_NOREMOVE="127.0.0.1:$ssh_port_noremove"
# For a chaos run that owns these services: how to restart them.
export EDIWATCH_TEST_SSHD_CONFIG="$tmp/ssh/sshd_config"
export EDIWATCH_TEST_PG_DATA="$tmp/pg"
export EDIWATCH_TEST_PG_BIN="$pg_bin"
export EDIWATCH_TEST_PG_LOG="$tmp/pgsock/pg.log"
log "sshd on 127.0.0.1:$ssh_port (drop $tmp/drop)"

