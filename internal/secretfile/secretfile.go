// Package secretfile reads the files that hold ediwatch's secrets
// (passwords, keys, tokens, DSNs: the configuration's *_file settings).
package secretfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// Read returns the content of the file at path, which a setting names as
// holding a secret. Its error never shows path: a secret pasted where the
// path of its file belongs would otherwise reach the logs in the error
// that refuses it ("open hunter2: no such file or directory"). The
// setting that names the file says which one it is.
func Read(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return nil, fmt.Errorf("cannot %s the file it names: %w", pe.Op, pe.Err)
	}
	return b, err
}
