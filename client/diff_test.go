package client

import "testing"

func TestUnifiedDiff(t *testing.T) {
	for _, tc := range []struct {
		name, a, b, want string
	}{
		{"equal", "a\nb\n", "a\nb\n", ""},
		{"one line changed", "a\nb\nc\n", "a\nx\nc\n", "--- old\n+++ new\n@@ -1,3 +1,3 @@\n a\n-b\n+x\n c\n"},
		{"added to an empty", "", "a\n", "--- old\n+++ new\n@@ -0,0 +1 @@\n+a\n"},
		{
			"two hunks far apart",
			"1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n",
			"0\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n13\n",
			"--- old\n+++ new\n@@ -1,4 +1,4 @@\n-1\n+0\n 2\n 3\n 4\n@@ -9,4 +9,4 @@\n 9\n 10\n 11\n-12\n+13\n",
		},
		{
			"changes close together share a hunk",
			"1\n2\n3\n4\n5\n6\n7\n8\n",
			"0\n2\n3\n4\n5\n6\n7\n9\n",
			"--- old\n+++ new\n@@ -1,8 +1,8 @@\n-1\n+0\n 2\n 3\n 4\n 5\n 6\n 7\n-8\n+9\n",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := UnifiedDiff("old", "new", tc.a, tc.b); got != tc.want {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}
