package config

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
)

// unknownKeys walks the raw configuration against the Config type and
// returns one message per key the type does not have, by key path with a
// suggestion when a known key is close:
//
//	sources[0].poll_intervall: unknown key (did you mean poll_interval?)
//
// Map-valued settings (sinks by name, routes, header files) accept any
// key; their values are walked when they are structures.
func unknownKeys(raw any, t reflect.Type, path string) []string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		m, ok := raw.(map[string]any)
		if !ok {
			return nil // a type mismatch: decoding reports it
		}
		fields := structKeys(t)
		var out []string
		for _, k := range sortedKeys(m) {
			ft, ok := fields[strings.ToLower(k)]
			if !ok {
				msg := fmt.Sprintf("%s: unknown key", join(path, k))
				if s := suggest(strings.ToLower(k), fields); s != "" {
					msg += fmt.Sprintf(" (did you mean %s?)", s)
				}
				out = append(out, msg)
				continue
			}
			out = append(out, unknownKeys(m[k], ft, join(path, k))...)
		}
		return out
	case reflect.Slice, reflect.Array:
		list, ok := raw.([]any)
		if !ok {
			return nil
		}
		var out []string
		for i, v := range list {
			out = append(out, unknownKeys(v, t.Elem(), fmt.Sprintf("%s[%d]", path, i))...)
		}
		return out
	case reflect.Map:
		m, ok := raw.(map[string]any)
		if !ok {
			return nil
		}
		var out []string
		for _, k := range sortedKeys(m) {
			out = append(out, unknownKeys(m[k], t.Elem(), join(path, k))...)
		}
		return out
	}
	return nil
}

// structKeys maps each configuration key of t to its field type,
// following mapstructure's tags (",squash" embeds a struct's keys).
func structKeys(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("mapstructure"), ",")
		if name == "-" {
			continue
		}
		if strings.Contains(opts, "squash") {
			for k, v := range structKeys(f.Type) {
				out[k] = v
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[strings.ToLower(name)] = f.Type
	}
	return out
}

// suggest returns the known key nearest to k when it is close enough to
// be a misspelling (at most two edits, or a quarter of a long key).
func suggest(k string, known map[string]reflect.Type) string {
	best, bestD := "", max(2, len(k)/4)+1
	for name := range known {
		if d := editDistance(k, name); d < bestD || (d == bestD && name < best) {
			best, bestD = name, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
