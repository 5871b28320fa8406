// Package store keeps minicloud's resources in an embedded bbolt database.
//
// Every write is one bbolt transaction that is fsynced before it returns, so
// whatever the API acknowledged survives a crash (kill -9) of the server.
// Resources are JSON documents keyed by ID; IDs come from a per-kind sequence,
// so key order is creation order (which makes paging stable) and an ID is
// never reused after deletion.
package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
)

// ErrNotFound is returned when a resource, name or key does not exist.
var ErrNotFound = errors.New("not found")

// ErrExists is returned when an address is taken by another owner.
var ErrExists = errors.New("already in use")

// ErrExhausted is returned when an address pool has no free address.
var ErrExhausted = errors.New("address pool exhausted")

// Kind names a collection of resources.
type Kind string

// The kinds minicloud stores.
const (
	Instances     Kind = "instances"
	LoadBalancers Kind = "load-balancers"
	Routes        Kind = "routes"
	BackendPools  Kind = "backend-pools"
)

var (
	bucketIdempotency = []byte("idempotency")
	bucketMeta        = []byte("meta")
)

func namesBucket(k Kind) []byte    { return []byte("names/" + string(k)) }
func ipsBucket(pool string) []byte { return []byte("ips/" + pool) }

// Store is the database. It is safe for concurrent use.
type Store struct {
	db *bolt.DB
}

// Open opens (creating if needed) the database file state.db in dir.
func Open(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create state dir %s: %w", dir, err)
	}
	path := filepath.Join(dir, "state.db")
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("open state database %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{
			[]byte(Instances), []byte(LoadBalancers), []byte(Routes), []byte(BackendPools),
			namesBucket(Instances), namesBucket(LoadBalancers), namesBucket(Routes), namesBucket(BackendPools),
			bucketIdempotency, bucketMeta,
		} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("initialize state database %s: %w", path, err)
	}
	return &Store{db: db}, nil
}

// EnsureKinds creates the collections (and their name indexes) of kinds
// that are not built in, such as a dialect's resources. It is idempotent.
func (s *Store) EnsureKinds(kinds ...Kind) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		for _, k := range kinds {
			for _, b := range [][]byte{[]byte(k), namesBucket(k)} {
				if _, err := tx.CreateBucketIfNotExists(b); err != nil {
					return fmt.Errorf("create collection %s: %w", k, err)
				}
			}
		}
		return nil
	})
}

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

// Update runs fn in a read-write transaction, committed (and synced) when fn
// returns nil.
func (s *Store) Update(fn func(*Tx) error) error {
	return s.db.Update(func(tx *bolt.Tx) error { return fn(&Tx{tx: tx}) })
}

// View runs fn in a read-only transaction.
func (s *Store) View(fn func(*Tx) error) error {
	return s.db.View(func(tx *bolt.Tx) error { return fn(&Tx{tx: tx}) })
}

// Tx is a transaction.
type Tx struct {
	tx *bolt.Tx
}

// NextID returns a new, never used ID for kind: prefix followed by a
// zero-padded hexadecimal sequence number.
func (t *Tx) NextID(kind Kind, prefix string) (string, error) {
	seq, err := t.tx.Bucket([]byte(kind)).NextSequence()
	if err != nil {
		return "", fmt.Errorf("next %s id: %w", kind, err)
	}
	return fmt.Sprintf("%s%012x", prefix, seq), nil
}

// Get decodes the resource id of kind into v.
func Get[T any](t *Tx, kind Kind, id string) (T, error) {
	var v T
	raw := t.tx.Bucket([]byte(kind)).Get([]byte(id))
	if raw == nil {
		return v, fmt.Errorf("%s %q: %w", kind, id, ErrNotFound)
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return v, fmt.Errorf("decode %s %q: %w", kind, id, err)
	}
	return v, nil
}

// Exists reports whether the resource id of kind exists, without decoding it.
func (t *Tx) Exists(kind Kind, id string) bool {
	return t.tx.Bucket([]byte(kind)).Get([]byte(id)) != nil
}

// Put stores v as the resource id of kind.
func Put(t *Tx, kind Kind, id string, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s %q: %w", kind, id, err)
	}
	if err := t.tx.Bucket([]byte(kind)).Put([]byte(id), raw); err != nil {
		return fmt.Errorf("store %s %q: %w", kind, id, err)
	}
	return nil
}

// Delete removes the resource id of kind; ErrNotFound if it does not exist.
func (t *Tx) Delete(kind Kind, id string) error {
	b := t.tx.Bucket([]byte(kind))
	if b.Get([]byte(id)) == nil {
		return fmt.Errorf("%s %q: %w", kind, id, ErrNotFound)
	}
	return b.Delete([]byte(id))
}

// List returns up to limit resources of kind with an ID greater than after,
// in ID order, that satisfy match (nil matches all). more reports whether
// further matching resources exist.
func List[T any](t *Tx, kind Kind, after string, limit int, match func(*T) bool) (items []T, more bool, err error) {
	c := t.tx.Bucket([]byte(kind)).Cursor()
	var k, raw []byte
	if after == "" {
		k, raw = c.First()
	} else {
		k, raw = c.Seek([]byte(after))
		if k != nil && bytes.Equal(k, []byte(after)) {
			k, raw = c.Next()
		}
	}
	for ; k != nil; k, raw = c.Next() {
		var v T
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, false, fmt.Errorf("decode %s %q: %w", kind, k, err)
		}
		if match != nil && !match(&v) {
			continue
		}
		if limit > 0 && len(items) == limit {
			return items, true, nil
		}
		items = append(items, v)
	}
	return items, false, nil
}

// ClaimName records that name of kind belongs to id. It returns the current
// owner and false when the name is taken by another resource.
func (t *Tx) ClaimName(kind Kind, name, id string) (owner string, ok bool, err error) {
	b := t.tx.Bucket(namesBucket(kind))
	if cur := b.Get([]byte(name)); cur != nil && string(cur) != id {
		return string(cur), false, nil
	}
	if err := b.Put([]byte(name), []byte(id)); err != nil {
		return "", false, fmt.Errorf("claim %s name %q: %w", kind, name, err)
	}
	return id, true, nil
}

// ReleaseName frees name of kind.
func (t *Tx) ReleaseName(kind Kind, name string) error {
	return t.tx.Bucket(namesBucket(kind)).Delete([]byte(name))
}

// LookupName returns the ID owning name of kind, or ErrNotFound.
func (t *Tx) LookupName(kind Kind, name string) (string, error) {
	id := t.tx.Bucket(namesBucket(kind)).Get([]byte(name))
	if id == nil {
		return "", fmt.Errorf("%s named %q: %w", kind, name, ErrNotFound)
	}
	return string(id), nil
}

// IdempotencyRecord remembers what a POST with an Idempotency-Key created.
type IdempotencyRecord struct {
	// RequestHash identifies the request body the key was first used with.
	RequestHash string `json:"request_hash"`
	Kind        Kind   `json:"kind"`
	ID          string `json:"id"`
	// Response is the resource as first returned, replayed when the
	// resource has since been deleted.
	Response json.RawMessage `json:"response"`
}

// Idempotency returns the record stored under key, or ErrNotFound.
func (t *Tx) Idempotency(key string) (IdempotencyRecord, error) {
	var rec IdempotencyRecord
	raw := t.tx.Bucket(bucketIdempotency).Get([]byte(key))
	if raw == nil {
		return rec, fmt.Errorf("idempotency key: %w", ErrNotFound)
	}
	if err := json.Unmarshal(raw, &rec); err != nil {
		return rec, fmt.Errorf("decode idempotency record: %w", err)
	}
	return rec, nil
}

// PutIdempotency stores rec under key.
func (t *Tx) PutIdempotency(key string, rec IdempotencyRecord) error {
	raw, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encode idempotency record: %w", err)
	}
	return t.tx.Bucket(bucketIdempotency).Put([]byte(key), raw)
}

// AllocateIP assigns a free address of prefix in pool to owner. It hands out
// addresses round-robin from the last allocation, so a released address is
// not reused right away. The network and broadcast addresses are skipped.
func (t *Tx) AllocateIP(pool string, prefix netip.Prefix, owner string) (netip.Addr, error) {
	b, err := t.tx.CreateBucketIfNotExists(ipsBucket(pool))
	if err != nil {
		return netip.Addr{}, fmt.Errorf("ip pool %s: %w", pool, err)
	}
	prefix = prefix.Masked()
	first := prefix.Addr().Next()
	last := lastAddr(prefix)
	if prefix.Bits() < prefix.Addr().BitLen()-1 {
		last = last.Prev()
	} else {
		first = prefix.Addr()
	}
	cursorKey := []byte("cursor/" + pool)
	start := first
	if raw := t.tx.Bucket(bucketMeta).Get(cursorKey); raw != nil {
		if a, err := netip.ParseAddr(string(raw)); err == nil && prefix.Contains(a) && a.Compare(last) < 0 && a.Compare(first) >= 0 {
			start = a.Next()
		}
	}
	a := start
	for {
		if b.Get([]byte(a.String())) == nil {
			if err := b.Put([]byte(a.String()), []byte(owner)); err != nil {
				return netip.Addr{}, err
			}
			if err := t.tx.Bucket(bucketMeta).Put(cursorKey, []byte(a.String())); err != nil {
				return netip.Addr{}, err
			}
			return a, nil
		}
		if a == last {
			a = first
		} else {
			a = a.Next()
		}
		if a == start {
			return netip.Addr{}, fmt.Errorf("pool %s (%s): %w", pool, prefix, ErrExhausted)
		}
	}
}

// ClaimIP assigns the given address of prefix in pool to owner; ErrExists
// when another owner holds it, and an error when it is outside prefix.
func (t *Tx) ClaimIP(pool string, prefix netip.Prefix, addr netip.Addr, owner string) error {
	if !prefix.Masked().Contains(addr) {
		return fmt.Errorf("address %s is outside pool %s (%s)", addr, pool, prefix)
	}
	b, err := t.tx.CreateBucketIfNotExists(ipsBucket(pool))
	if err != nil {
		return fmt.Errorf("ip pool %s: %w", pool, err)
	}
	if cur := b.Get([]byte(addr.String())); cur != nil && string(cur) != owner {
		return fmt.Errorf("address %s of pool %s: %w", addr, pool, ErrExists)
	}
	return b.Put([]byte(addr.String()), []byte(owner))
}

// ReleaseIP frees addr in pool. Releasing a free address is not an error.
func (t *Tx) ReleaseIP(pool string, addr string) error {
	b := t.tx.Bucket(ipsBucket(pool))
	if b == nil || addr == "" {
		return nil
	}
	return b.Delete([]byte(addr))
}

func lastAddr(p netip.Prefix) netip.Addr {
	a := p.Addr().AsSlice()
	bits := p.Bits()
	for i := range a {
		for j := 0; j < 8; j++ {
			if i*8+j >= bits {
				a[i] |= 1 << (7 - j)
			}
		}
	}
	out, _ := netip.AddrFromSlice(a)
	return out
}
