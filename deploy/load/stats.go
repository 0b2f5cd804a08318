package load

import (
	"math"
	"slices"
	"time"
)

// Percentile is the nearest-rank p-th percentile (0 < p <= 100) of
// latencies, which it sorts in place; zero for none. Nearest rank keeps
// every reported value one that was observed.
func Percentile(latencies []time.Duration, p float64) time.Duration {
	if len(latencies) == 0 {
		return 0
	}
	slices.Sort(latencies)
	rank := int(math.Ceil(float64(len(latencies))*p/100)) - 1
	return latencies[max(0, min(rank, len(latencies)-1))]
}

// Median is the median of values, the mean of the middle two for an even
// count; zero for none. It does not reorder values.
func Median(values []float64) float64 {
	if len(values) == 0 {
		return 0
	}
	s := slices.Clone(values)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// MedianDuration is Median for durations.
func MedianDuration(values []time.Duration) time.Duration {
	f := make([]float64, len(values))
	for i, v := range values {
		f[i] = float64(v)
	}
	return time.Duration(Median(f))
}

// Ratio is a/b, or zero when b is zero: a side that did nothing has no
// meaningful ratio, and zero stands out in a table where infinity would
// break JSON.
func Ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}
