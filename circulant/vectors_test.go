package circulant

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// vectorsDir is where the reference vectors live relative to this package.
const vectorsDir = "../../shared/vectors"

// loadVectors decodes the named vector file into v, or skips the test with
// a clear message if the vectors are not present beside the repository.
func loadVectors(t testing.TB, name string, v any) {
	t.Helper()
	path := filepath.Join(vectorsDir, name)
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		t.Skipf("reference vectors not found at %s (they live in ../shared/vectors beside the repository)", path)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
