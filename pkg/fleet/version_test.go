package fleet

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseVersion(t *testing.T) {
	tests := []struct {
		in      string
		parts   []uint32
		wantErr string
	}{
		{in: "12", parts: []uint32{12}},
		{in: "12.4", parts: []uint32{12, 4}},
		{in: "12.10", parts: []uint32{12, 10}},
		{in: "535.104.05", parts: []uint32{535, 104, 5}},
		{in: "0", parts: []uint32{0}},
		{in: "1.2.3.4", parts: []uint32{1, 2, 3, 4}},
		{in: "999999999", parts: []uint32{999999999}},
		{in: "", wantErr: "is empty"},
		{in: "12.", wantErr: "has an empty component"},
		{in: ".4", wantErr: "has an empty component"},
		{in: "12..4", wantErr: "has an empty component"},
		{in: "v12.4", wantErr: `has a component "v12" that is not a number`},
		{in: "12.x", wantErr: `has a component "x" that is not a number`},
		{in: " 12.4", wantErr: "that is not a number"},
		{in: "12.4 ", wantErr: "that is not a number"},
		{in: "-1", wantErr: "that is not a number"},
		{in: "+1", wantErr: "that is not a number"},
		{in: "12.4-rc1", wantErr: "that is not a number"},
		{in: "１２", wantErr: "that is not a number"},
		{in: "1.2.3.4.5", wantErr: "has more than 4 dot-separated components"},
		{in: "1234567890", wantErr: "of more than 9 digits"},
	}
	for _, tt := range tests {
		t.Run(strconv.Quote(tt.in), func(t *testing.T) {
			v, err := ParseVersion(tt.in)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				require.True(t, v.IsZero(), "a failed parse returns the zero version")
				return
			}
			require.NoError(t, err)
			require.Equal(t, len(tt.parts), v.Len())
			for i, p := range tt.parts {
				require.Equal(t, p, v.Part(i))
			}
			require.Zero(t, v.Part(len(tt.parts)), "components beyond those written are zero")
			require.Equal(t, tt.in, v.String(), "a version reads back as written")
		})
	}
}

func TestVersionCompare(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"12.10", "12.9", +1},
		{"12.9", "12.10", -1},
		{"12", "12.0", 0},
		{"12.0.0", "12", 0},
		{"12.4", "12.4.1", -1},
		{"535.104.05", "535.104.5", 0},
		{"535.104.05", "535.54.03", +1},
		{"550.54.15", "535.104.05", +1},
		{"11.8", "12.0", -1},
		{"13", "12.99", +1},
	}
	for _, tt := range tests {
		t.Run(tt.a+" vs "+tt.b, func(t *testing.T) {
			a, b := mustParseVersion(tt.a), mustParseVersion(tt.b)
			require.Equal(t, tt.want, a.Compare(b))
			require.Equal(t, -tt.want, b.Compare(a), "antisymmetric")
			require.Equal(t, tt.want >= 0, a.AtLeast(b))
		})
	}
	require.Equal(t, -1, Version{}.Compare(mustParseVersion("0.1")), "the zero version is below every other")
	require.Equal(t, 0, Version{}.Compare(mustParseVersion("0")), "and compares like 0")
}

// mustParseVersion is ParseVersion for constants known to be valid; it
// panics on an invalid one.
func mustParseVersion(s string) Version {
	v, err := ParseVersion(s)
	if err != nil {
		panic(fmt.Sprintf("mustParseVersion(%q): %v", s, err))
	}
	return v
}

// FuzzParseVersion checks that no input panics, that what parses reads back
// as written and agrees with a plain reference parse, and that comparison
// is reflexive. Run it with go test -fuzz=FuzzParseVersion ./pkg/fleet.
func FuzzParseVersion(f *testing.F) {
	for _, s := range []string{"12.4", "12.10", "535.104.05", "", ".", "1..2", "v1", "1.2.3.4.5", "999999999.1", "1234567890", "12.4\x00", "١٢"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseVersion(s)
		want, ok := referenceParse(s)
		if err != nil {
			if ok {
				t.Fatalf("ParseVersion(%q) failed (%v) but the reference parses it as %v", s, err, want)
			}
			if !v.IsZero() {
				t.Fatalf("ParseVersion(%q) failed but returned %v", s, v)
			}
			if msg := err.Error(); msg == "" || strings.ContainsRune(msg, '\n') {
				t.Fatalf("ParseVersion(%q) error %q is not one line", s, msg)
			}
			return
		}
		if !ok {
			t.Fatalf("ParseVersion(%q) = %v but the reference rejects it", s, v)
		}
		if v.String() != s {
			t.Fatalf("ParseVersion(%q).String() = %q", s, v.String())
		}
		if v.Len() != len(want) {
			t.Fatalf("ParseVersion(%q) has %d components, want %d", s, v.Len(), len(want))
		}
		for i, p := range want {
			if v.Part(i) != p {
				t.Fatalf("ParseVersion(%q).Part(%d) = %d, want %d", s, i, v.Part(i), p)
			}
		}
		if v.Compare(v) != 0 {
			t.Fatalf("%q does not compare equal to itself", s)
		}
		again, err := ParseVersion(v.String())
		if err != nil || again != v {
			t.Fatalf("%q does not parse back to itself: %v, %v", s, again, err)
		}
	})
}

// referenceParse is a second, simpler reading of the version grammar.
func referenceParse(s string) ([]uint32, bool) {
	fields := strings.Split(s, ".")
	if s == "" || len(fields) > maxVersionParts {
		return nil, false
	}
	out := make([]uint32, len(fields))
	for i, f := range fields {
		if f == "" || len(f) > maxPartDigits || strings.Trim(f, "0123456789") != "" {
			return nil, false
		}
		n, err := strconv.ParseUint(f, 10, 32)
		if err != nil {
			return nil, false
		}
		out[i] = uint32(n)
	}
	return out, true
}
