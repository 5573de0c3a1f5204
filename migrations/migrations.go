// Package migrations embeds the numbered SQL migrations of each store
// driver: postgres/NNNN_name.sql and sqlite/NNNN_name.sql, applied in
// order, each once.
package migrations

import (
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
)

// FS holds postgres/*.sql and sqlite/*.sql.
//
//go:embed postgres/*.sql sqlite/*.sql
var FS embed.FS

// Migration is one numbered migration of a driver.
type Migration struct {
	Version int
	Name    string // the file name, e.g. 0002_delivery.sql
	SQL     string
}

// Of returns the migrations of driver ("postgres", "sqlite") in order.
func Of(driver string) ([]Migration, error) {
	files, err := fs.Glob(FS, driver+"/*.sql")
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	var out []Migration
	for _, f := range files {
		name := strings.TrimPrefix(f, driver+"/")
		v, err := strconv.Atoi(strings.SplitN(name, "_", 2)[0])
		if err != nil {
			return nil, fmt.Errorf("migrate: bad migration name %s", name)
		}
		sql, err := fs.ReadFile(FS, f)
		if err != nil {
			return nil, err
		}
		out = append(out, Migration{Version: v, Name: name, SQL: string(sql)})
	}
	return out, nil
}

// Latest returns the number of driver's last migration: the schema this
// build of ediwatch knows.
func Latest(driver string) (int, error) {
	all, err := Of(driver)
	if err != nil {
		return 0, err
	}
	if len(all) == 0 {
		return 0, fmt.Errorf("migrate: no migrations for %s", driver)
	}
	return all[len(all)-1].Version, nil
}
