package agentfsm_test

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
)

func TestPrintAPI(t *testing.T) {
	for _, dir := range strings.Fields(os.Getenv("APIDIRS")) {
		names := exported(t, dir)
		var l []string
		for n := range names {
			if i := strings.Index(n, "."); i > 0 && !names[n[:i]] {
				continue
			}
			l = append(l, n)
		}
		sort.Strings(l)
		fmt.Printf("== %s %d\n%s\n", dir, len(l), strings.Join(l, " "))
	}
}
