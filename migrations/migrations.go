// Package migrations embeds the numbered SQL migrations of each store
// driver: postgres/NNNN_name.sql and sqlite/NNNN_name.sql, applied in
// order, each once.
package migrations

import "embed"

// FS holds postgres/*.sql and sqlite/*.sql.
//
//go:embed postgres/*.sql sqlite/*.sql
var FS embed.FS
