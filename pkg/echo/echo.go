// Package echo bounds how much of a user's input stratus repeats in an error,
// a Service condition, an event or a log line. An annotation value or a config
// value may be up to hundreds of kilobytes; a message that repeats it whole is
// unreadable and can exceed what the API server stores (an event note is at most
// 1 kB). A shortened text ends with a marker that says how long the original was.
package echo

import (
	"fmt"
	"strconv"
	"unicode/utf8"
)

// Bounds, in bytes, of what a message repeats.
const (
	// MaxValue bounds one repeated value (an annotation's, a config field's).
	MaxValue = 64
	// MaxName bounds one repeated name (an annotation's key).
	MaxName = 128
	// MaxMessage bounds a whole message: a condition message, an event, an
	// error logged for an object.
	MaxMessage = 1024
)

// Shorten returns s when it has at most limit bytes, and otherwise its first limit
// bytes or fewer (cut between characters) followed by a marker with the length
// of s: Shorten("abcdef", 3) is "abc...[6 bytes]".
func Shorten(s string, limit int) string {
	head, long := cut(s, limit)
	if !long {
		return s
	}
	return head + marker(len(s))
}

// Quote returns s quoted as strconv.Quote does, shortened as Shorten does; the
// marker follows the closing quote: Quote("abcdef", 3) is `"abc"...[6 bytes]`.
func Quote(s string, limit int) string {
	head, long := cut(s, limit)
	if !long {
		return strconv.Quote(s)
	}
	return strconv.Quote(head) + marker(len(s))
}

// cut returns the longest prefix of s of at most limit bytes that ends between
// characters, and whether it is shorter than s.
func cut(s string, limit int) (string, bool) {
	if len(s) <= limit {
		return s, false
	}
	n := max(0, limit)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n], true
}

func marker(n int) string { return fmt.Sprintf("...[%d bytes]", n) }
