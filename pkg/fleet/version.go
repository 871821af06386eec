package fleet

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// maxVersionParts bounds the components of a Version: a driver version has
// three (535.104.05), a CUDA version two.
const maxVersionParts = 4

// maxPartDigits bounds one component, so that it fits a uint32 whatever its
// digits.
const maxPartDigits = 9

// Version is a dotted numeric version such as "12.4" or "535.104.05".
// Versions compare component by component, as numbers: 12.10 is above 12.9,
// and a missing component counts as zero, so 12 equals 12.0. The zero
// Version means "no version".
//
// Version is comparable with ==, but == also compares the spelling ("05"
// against "5", "12" against "12.0"); use Compare or Equal to compare values.
type Version struct {
	parts [maxVersionParts]uint32
	n     uint8
	// text is the version as written, kept so that "535.104.05" reads back
	// as the driver reports it.
	text string
}

// ParseVersion reads a dotted numeric version: one to four components of
// one to nine decimal digits each, separated by single dots, nothing else
// (no spaces, signs, "v" prefix or suffix). Its errors are phrases that
// follow the value ("is empty", "has a component ..."), for callers to
// prefix with what held the value.
func ParseVersion(s string) (Version, error) {
	if s == "" {
		return Version{}, errors.New("is empty")
	}
	var v Version
	rest := s
	for {
		part, tail, more := strings.Cut(rest, ".")
		if int(v.n) == maxVersionParts {
			return Version{}, fmt.Errorf("has more than %d dot-separated components", maxVersionParts)
		}
		if part == "" {
			return Version{}, errors.New("has an empty component (a leading, trailing or doubled dot)")
		}
		if len(part) > maxPartDigits {
			return Version{}, fmt.Errorf("has a component %s of more than %d digits", quote(part), maxPartDigits)
		}
		for i := 0; i < len(part); i++ {
			if part[i] < '0' || part[i] > '9' {
				return Version{}, fmt.Errorf("has a component %s that is not a number", quote(part))
			}
		}
		n, err := strconv.ParseUint(part, 10, 32)
		if err != nil { // unreachable after the checks above; kept so no input panics
			return Version{}, fmt.Errorf("has a component %s that does not parse: %w", quote(part), err)
		}
		v.parts[v.n] = uint32(n)
		v.n++
		if !more {
			break
		}
		rest = tail
	}
	v.text = s
	return v, nil
}

// IsZero reports whether v is the zero Version, "no version".
func (v Version) IsZero() bool { return v.n == 0 }

// Len is how many components v was written with.
func (v Version) Len() int { return int(v.n) }

// Part returns component i (0 is the major); components beyond those
// written are zero.
func (v Version) Part(i int) uint32 {
	if i < 0 || i >= int(v.n) {
		return 0
	}
	return v.parts[i]
}

// Compare returns -1, 0 or +1 as v is below, equal to or above o,
// comparing components as numbers and missing ones as zero.
func (v Version) Compare(o Version) int {
	for i := range maxVersionParts {
		a, b := v.Part(i), o.Part(i)
		switch {
		case a < b:
			return -1
		case a > b:
			return +1
		}
	}
	return 0
}

// AtLeast reports whether v is o or above.
func (v Version) AtLeast(o Version) bool { return v.Compare(o) >= 0 }

// String returns the version as it was written; "" for the zero Version.
func (v Version) String() string { return v.text }
