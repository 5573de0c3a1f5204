package local

import (
	"testing"

	"github.com/ediwatch/ediwatch/internal/poller/sourcetest"
)

func TestSourceSuite(t *testing.T) {
	sourcetest.Run(t, Source{}, func(t *testing.T) sourcetest.Drop {
		d := t.TempDir()
		return sourcetest.Drop{Local: d, Remote: d}
	})
}

func TestIntake(t *testing.T) {
	sourcetest.RunIntake(t, Source{}, func(t *testing.T) sourcetest.Drop {
		d := t.TempDir()
		return sourcetest.Drop{Local: d, Remote: d}
	})
}
