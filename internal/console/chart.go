package console

import (
	"fmt"
	"time"

	"github.com/ediwatch/ediwatch/internal/store"
)

// chartHours is how many hours the overview's chart shows.
const chartHours = 24

// chart is an inline SVG bar chart of one count per hour, its geometry
// computed here so the template only prints numbers (no script, no
// inline style).
type chart struct {
	Title         string
	Width, Height int
	Max, Total    int
	// AxisY is the baseline's height, TickY the hour labels'.
	AxisY, TickY int
	Bars         []chartBar
	Ticks        []chartTick
}

type chartBar struct {
	X, Y, W, H int
	Label      string
}

type chartTick struct {
	X     int
	Label string
}

// hourCharts returns the files and deliveries per hour of the last
// chartHours hours up to now's hour, from hours.
func hourCharts(hours []store.HourCount, now time.Time) (files, deliveries chart) {
	last := now.UTC().Truncate(time.Hour)
	first := last.Add(-(chartHours - 1) * time.Hour)
	var f, d [chartHours]int
	for _, h := range hours {
		i := int(h.Hour.Sub(first) / time.Hour)
		if i >= 0 && i < chartHours {
			f[i] += h.Files
			d[i] += h.Deliveries
		}
	}
	return barChart("Files recorded per hour", f, first, "files"), barChart("Deliveries per hour", d, first, "deliveries")
}

func barChart(title string, counts [chartHours]int, first time.Time, noun string) chart {
	const w, h, top, bottom, step = 576, 96, 6, 18, 24
	c := chart{Title: title, Width: w, Height: h, AxisY: h - bottom, TickY: h - 4}
	for _, n := range counts {
		c.Max, c.Total = max(c.Max, n), c.Total+n
	}
	plot := h - top - bottom
	for i, n := range counts {
		at := first.Add(time.Duration(i) * time.Hour)
		bh := 0
		if c.Max > 0 {
			bh = n * plot / c.Max
		}
		if n > 0 && bh == 0 {
			bh = 1
		}
		c.Bars = append(c.Bars, chartBar{X: i*step + 2, Y: top + plot - bh, W: step - 4, H: bh,
			Label: fmt.Sprintf("%s: %d %s", at.Format("15:04"), n, noun)})
		if i%6 == 0 {
			c.Ticks = append(c.Ticks, chartTick{X: i*step + 2, Label: at.Format("15:04")})
		}
	}
	return c
}
