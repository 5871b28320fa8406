package echo_test

import (
	"strings"
	"testing"

	"github.com/stratus-ccm/stratus/pkg/echo"
)

func TestShortenAndQuote(t *testing.T) {
	for _, tc := range []struct {
		s          string
		max        int
		short, quo string
	}{
		{"abc", 3, "abc", `"abc"`},
		{"abcdef", 3, "abc...[6 bytes]", `"abc"...[6 bytes]`},
		{"", 0, "", `""`},
		{"ab", 0, "...[2 bytes]", `""...[2 bytes]`},
		// Never cut inside a character: "é" is two bytes.
		{"aé", 2, "a...[3 bytes]", `"a"...[3 bytes]`},
		{"a\nb", 1, "a...[3 bytes]", `"a"...[3 bytes]`},
		{"a\nb", 5, "a\nb", `"a\nb"`},
	} {
		if got := echo.Shorten(tc.s, tc.max); got != tc.short {
			t.Errorf("Shorten(%q, %d) = %q, want %q", tc.s, tc.max, got, tc.short)
		}
		if got := echo.Quote(tc.s, tc.max); got != tc.quo {
			t.Errorf("Quote(%q, %d) = %q, want %q", tc.s, tc.max, got, tc.quo)
		}
	}
	long := strings.Repeat("x", 30000)
	if got := echo.Shorten(long, echo.MaxMessage); len(got) > echo.MaxMessage+len("...[30000 bytes]") || !strings.HasSuffix(got, "...[30000 bytes]") {
		t.Errorf("Shorten of 30000 bytes = %d bytes ending %q", len(got), got[len(got)-20:])
	}
}
