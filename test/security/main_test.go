package security

import (
	"os"
	"testing"

	"kplane.dev/test/e2e/harness"
)

func TestMain(m *testing.M) { os.Exit(harness.Main(m)) }
