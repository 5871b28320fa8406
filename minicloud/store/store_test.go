package store

import (
	"errors"
	"fmt"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
)

type item struct {
	ID  string `json:"id"`
	Odd bool   `json:"odd"`
}

func open(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestListPagesInCreationOrder(t *testing.T) {
	s := open(t, t.TempDir())
	var ids []string
	err := s.Update(func(tx *Tx) error {
		for i := range 7 {
			id, err := tx.NextID(Instances, "i-")
			if err != nil {
				return err
			}
			ids = append(ids, id)
			if err := Put(tx, Instances, id, item{ID: id, Odd: i%2 == 1}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	odd := func(i *item) bool { return i.Odd }
	for _, tc := range []struct {
		name     string
		after    string
		limit    int
		match    func(*item) bool
		want     []string
		wantMore bool
	}{
		{"all", "", 0, nil, ids, false},
		{"first page", "", 3, nil, ids[:3], true},
		{"middle page", ids[2], 3, nil, ids[3:6], true},
		{"last page exactly full", ids[3], 3, nil, ids[4:7], false},
		{"filtered", "", 2, odd, []string{ids[1], ids[3]}, true},
		{"filtered last", ids[3], 2, odd, []string{ids[5]}, false},
		{"after a deleted or unknown id", "i-0000000000025", 0, nil, ids[2:], false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []item
			var more bool
			err := s.View(func(tx *Tx) error {
				var err error
				got, more, err = List(tx, Instances, tc.after, tc.limit, tc.match)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			var gotIDs []string
			for _, i := range got {
				gotIDs = append(gotIDs, i.ID)
			}
			if diff := cmp.Diff(tc.want, gotIDs); diff != "" || more != tc.wantMore {
				t.Errorf("IDs (-want +got):\n%s more=%v want %v", diff, more, tc.wantMore)
			}
		})
	}
}

func TestAllocateIP(t *testing.T) {
	s := open(t, t.TempDir())
	prefix := netip.MustParsePrefix("10.0.0.0/29") // .1-.6 usable
	var got []string
	err := s.Update(func(tx *Tx) error {
		for i := range 6 {
			a, err := tx.AllocateIP("p", prefix, fmt.Sprint(i))
			if err != nil {
				return err
			}
			got = append(got, a.String())
		}
		if _, err := tx.AllocateIP("p", prefix, "x"); !errors.Is(err, ErrExhausted) {
			return fmt.Errorf("7th allocation: %v, want ErrExhausted", err)
		}
		// A freed address is found again, but only after the others.
		if err := tx.ReleaseIP("p", "10.0.0.3"); err != nil {
			return err
		}
		a, err := tx.AllocateIP("p", prefix, "y")
		if err != nil || a.String() != "10.0.0.3" {
			return fmt.Errorf("after release: %v, %v", a, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5", "10.0.0.6"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("allocations (-want +got):\n%s", diff)
	}
	// Round-robin: after releasing .1 and .5, the next is .5 (after the
	// last allocation .3), not .1.
	err = s.Update(func(tx *Tx) error {
		tx.ReleaseIP("p", "10.0.0.1")
		tx.ReleaseIP("p", "10.0.0.5")
		a, err := tx.AllocateIP("p", prefix, "z")
		if err != nil || a.String() != "10.0.0.5" {
			return fmt.Errorf("round-robin allocation: %v, %v; want 10.0.0.5", a, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestNamesAndReopen(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	err = s.Update(func(tx *Tx) error {
		if _, ok, err := tx.ClaimName(LoadBalancers, "web", "lb-1"); !ok || err != nil {
			return fmt.Errorf("first claim: %v %v", ok, err)
		}
		if owner, ok, _ := tx.ClaimName(LoadBalancers, "web", "lb-2"); ok || owner != "lb-1" {
			return fmt.Errorf("second claim: ok=%v owner=%s", ok, owner)
		}
		return tx.PutIdempotency("k", IdempotencyRecord{RequestHash: "h", Kind: LoadBalancers, ID: "lb-1", Response: []byte(`{}`)})
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir)
	err = s.View(func(tx *Tx) error {
		id, err := tx.LookupName(LoadBalancers, "web")
		if err != nil || id != "lb-1" {
			return fmt.Errorf("name after reopen: %q, %v", id, err)
		}
		if _, err := tx.LookupName(Instances, "web"); !errors.Is(err, ErrNotFound) {
			return fmt.Errorf("names are per kind: %v", err)
		}
		rec, err := tx.Idempotency("k")
		if err != nil || rec.ID != "lb-1" {
			return fmt.Errorf("idempotency after reopen: %+v, %v", rec, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
