-- The PostgreSQL server ediwatch last wrote through: its system
-- identifier and timeline. A new connection to another (a standby
-- promoted by a failover: same system, next timeline; or a database
-- restored into another cluster) is noticed, logged and counted, and
-- the pollers ask the store again about every file they remembered.
CREATE TABLE server_identity (
    id                int PRIMARY KEY CHECK (id = 1),
    system_identifier text NOT NULL,
    timeline          bigint NOT NULL,
    seen_at           timestamptz NOT NULL
);
