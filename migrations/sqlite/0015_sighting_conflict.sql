-- The key conflicts a file's ingest recorded, by the ingest's correlation
-- id. Each 999 the ingest records first asks whether a set of its group
-- was a key conflict (quarantined content is not acknowledged as
-- accepted): through sighting_correlation that read every sighting of the
-- file, so a re-sent file of N one-set interchanges, every set a
-- duplicate and each group its own 999, read N sightings N times (8,000
-- interchanges: 5 s; 200,000 would outlast the ingest's timeout). Key
-- conflicts are few: the partial index holds them alone.
CREATE INDEX sighting_conflict ON sighting (correlation_id, key) WHERE kind = 'conflict';
