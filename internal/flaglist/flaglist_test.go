package flaglist

import (
	"slices"
	"testing"
)

func TestSplit(t *testing.T) {
	cases := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{" ", nil},
		{",, ,", nil},
		{"a", []string{"a"}},
		{"a,b", []string{"a", "b"}},
		{" a , b ", []string{"a", "b"}},
		{"a,,b,", []string{"a", "b"}},
		{"127.0.0.1:9042,\t127.0.0.2:9042\n", []string{"127.0.0.1:9042", "127.0.0.2:9042"}},
		{"c1=127.0.0.1:7000, c2=127.0.0.1:7001", []string{"c1=127.0.0.1:7000", "c2=127.0.0.1:7001"}},
		{"a b,c", []string{"a b", "c"}}, // a blank inside an item stays: only commas separate
	}
	for _, c := range cases {
		got := Split(c.in)
		if !slices.Equal(got, c.want) || (got == nil) != (c.want == nil) {
			t.Errorf("Split(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
