-- The key conflicts a file's ingest recorded, by the ingest's correlation
-- id. Each 999 the ingest records first asks whether a set of its group
-- was a key conflict (quarantined content is not acknowledged as
-- accepted): through sighting_correlation that read every sighting of the
-- file, so a re-sent file of N one-set interchanges, every set a
-- duplicate and each group its own 999, read N sightings N times. Key
-- conflicts are few: the partial index holds them alone. Built without
-- CONCURRENTLY (README, Upgrading); it reads the sightings once.
CREATE INDEX sighting_conflict ON sighting (correlation_id, key) WHERE kind = 'conflict';
