//go:build tools

// Package tools pins Prometheus 3 for the tests: build.sh builds its server from this
// module's requirements, so go.mod and go.sum say exactly what runs.
package tools

import _ "github.com/prometheus/prometheus/cmd/prometheus"
