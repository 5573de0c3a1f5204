-- The console's file page finds what one arrival recorded by its
-- correlation id: the ledger row, its inbox rows, sightings and outbox rows.
CREATE INDEX remote_file_correlation ON remote_file (correlation_id);
CREATE INDEX inbox_correlation ON inbox (correlation_id);
CREATE INDEX sighting_correlation ON sighting (correlation_id);
CREATE INDEX outbox_correlation ON outbox (correlation_id);
