// Package grafana holds kplane's Grafana dashboard (kplane.json: the
// golden signals of every service) and reads the metrics its PromQL
// queries name, so that a test can check each against what the services
// export. A query's metric is found by tokenising it, without a PromQL
// parser: function and aggregation names, grouping label lists, label
// matchers, ranges, numbers, strings and Grafana variables are skipped,
// and what remains are metric names.
package grafana
