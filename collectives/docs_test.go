package collectives

import (
	"os"
	"strings"
	"testing"
)

// TestAlgorithmsPageNamesEveryAlgorithm keeps docs/ALGORITHMS.md true: it
// must name, as `name`, every algorithm that implements some collective.
func TestAlgorithmsPageNamesEveryAlgorithm(t *testing.T) {
	page, err := os.ReadFile("../docs/ALGORITHMS.md")
	if err != nil {
		t.Fatal(err)
	}
	for a := range numAlgorithms {
		registered := false
		for coll := range numColls {
			registered = registered || Implements(coll, a)
		}
		if registered && !strings.Contains(string(page), "`"+a.String()+"`") {
			t.Errorf("docs/ALGORITHMS.md does not name algorithm `%v`", a)
		}
	}
}
