package command

import "testing"

func TestServerIDFromName(t *testing.T) {
	for name, want := range map[string]uint32{"db-0": 1, "db-1": 2, "shop-db-41": 42} {
		if got := ServerIDFromName(name); got != want {
			t.Errorf("ServerIDFromName(%q) = %d, want %d", name, got, want)
		}
	}
	a, b := ServerIDFromName("alpha"), ServerIDFromName("beta")
	if a == b || a < 1<<31 || b < 1<<31 || a == 0 {
		t.Errorf("names without an ordinal: %d, %d", a, b)
	}
}

func TestValidate(t *testing.T) {
	o := &Options{StopTimeout: 1}
	if err := o.validate(); err == nil {
		t.Fatal("empty options validated")
	}
}
