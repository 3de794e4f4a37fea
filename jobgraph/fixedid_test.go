package jobgraph

import "testing"

func TestApplicationJobID(t *testing.T) {
	a0, a1 := ApplicationJobID("/app-1", 0), ApplicationJobID("/app-1", 1)
	if a0 != ApplicationJobID("/app-1", 0) {
		t.Fatal("not deterministic")
	}
	if a0 == a1 || a0 == ApplicationJobID("/app-2", 0) {
		t.Fatalf("IDs collide: %s %s", a0, a1)
	}
	for _, id := range []string{a0, a1} {
		if err := ValidateJobID(id); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
	}
	if a1[:24] != a0[:24] || a1[24:] != "00000001" {
		t.Fatalf("job 1 of the application: %s (job 0: %s)", a1, a0)
	}
}
