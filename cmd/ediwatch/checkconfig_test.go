package main

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/ediwatch/ediwatch/internal/config"
)

// TestConfigExample: config.example.yaml loads, and names every key of the
// configuration schema.
func TestConfigExample(t *testing.T) {
	path := "../../config.example.yaml"
	stdout, stderr, code := runCLI(t, "check-config", "--config", path)
	if code != 0 || !strings.Contains(stdout, "configuration is valid: store sqlite, 1 sources, 3 sinks") {
		t.Fatalf("exit %d: %s %s", code, stdout, stderr)
	}
	body, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var missing []string
	var walk func(typ reflect.Type)
	walk = func(typ reflect.Type) {
		for i := 0; i < typ.NumField(); i++ {
			f := typ.Field(i)
			key := f.Tag.Get("mapstructure")
			if key == "" {
				continue
			}
			if !strings.Contains(string(body), key+":") {
				missing = append(missing, key)
			}
			ft := f.Type
			for ft.Kind() == reflect.Slice || ft.Kind() == reflect.Map {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				walk(ft)
			}
		}
	}
	walk(reflect.TypeOf(config.Config{}))
	if len(missing) > 0 {
		t.Errorf("config.example.yaml does not document %v", missing)
	}
	if _, _, code := runCLI(t, "check-config", "--config", "../../internal/config/testdata/route.bad.yaml"); code != 2 {
		t.Errorf("bad config: exit %d", code)
	}
}
