// Package claimcheck keeps a workflow's large payloads out of its
// Temporal history: Codec, a converter.PayloadCodec, moves each payload
// larger than a threshold into a Store and leaves in the history a small
// reference to it, the SHA-256 of its content. The reference is
// deterministic (a replay encodes the same payload to the same reference)
// and identical payloads are stored once.
//
// Every client and worker of the task queue must use the same codec over
// the same store: a worker that cannot reach the store cannot decode what
// another stored. Install it in the client's data converter:
//
//	store, err := claimcheck.NewDir("/var/lib/agentfsm/payloads")
//	dc := converter.NewCodecDataConverter(converter.GetDefaultDataConverter(),
//		&claimcheck.Codec{Store: store})
//	c, err := client.Dial(client.Options{DataConverter: dc})
//
// Dir is the store for one host; S3 the store for a fleet, in a bucket
// of S3 or of a service that speaks its API.
//
// Nothing is ever deleted from the store by the codec: a history that
// references a payload may be replayed as long as the server keeps it, so
// removing payloads is the operator's, after the namespace's retention.
package claimcheck

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"google.golang.org/protobuf/proto"
)

// Encoding is the encoding a reference payload's metadata names.
const Encoding = "agentfsm/claim-check-sha256"

// DefaultThreshold is the size in bytes above which Codec moves a payload
// into its store when Codec.Threshold is 0.
const DefaultThreshold = 2 << 10

// Store keeps the payloads Codec moved out of the history, by key. A key
// is the lowercase hex SHA-256 of the content (64 characters).
type Store interface {
	// Put stores data under key. Storing a key again stores the same
	// content: a store may keep the first and do nothing.
	Put(ctx context.Context, key string, data []byte) error
	// Get returns the content stored under key; an error wrapping
	// ErrNotFound when there is none.
	Get(ctx context.Context, key string) ([]byte, error)
}

// ErrNotFound is the error of a Get whose key the store does not hold.
var ErrNotFound = errors.New("claimcheck: no payload under this key")

// Codec is the claim-check payload codec. Its zero value needs a Store.
type Codec struct {
	// Store keeps the payloads; it is required.
	Store Store
	// Threshold is the size in bytes (of the payload as protobuf) above
	// which a payload is stored and referenced; 0 means DefaultThreshold.
	Threshold int
	// Timeout bounds each Put and Get; 0 means 30 s.
	Timeout time.Duration
}

// Encode replaces each payload larger than the threshold with a reference
// to it, stored first.
func (c *Codec) Encode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	if c.Store == nil {
		return nil, errors.New("claimcheck: Codec.Store is nil")
	}
	threshold := c.Threshold
	if threshold <= 0 {
		threshold = DefaultThreshold
	}
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		if proto.Size(p) <= threshold {
			out[i] = p
			continue
		}
		data, err := proto.MarshalOptions{Deterministic: true}.Marshal(p)
		if err != nil {
			return nil, fmt.Errorf("claimcheck: encoding a payload: %w", err)
		}
		sum := sha256.Sum256(data)
		key := hex.EncodeToString(sum[:])
		ctx, cancel := c.context()
		err = c.Store.Put(ctx, key, data)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("claimcheck: storing payload %s (%d bytes): %w", key, len(data), err)
		}
		out[i] = &commonpb.Payload{Metadata: map[string][]byte{"encoding": []byte(Encoding)}, Data: []byte(key)}
	}
	return out, nil
}

// Decode replaces each reference with the payload it stands for, checked
// against its hash; other payloads pass as they are.
func (c *Codec) Decode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		if string(p.GetMetadata()["encoding"]) != Encoding {
			out[i] = p
			continue
		}
		if c.Store == nil {
			return nil, errors.New("claimcheck: Codec.Store is nil")
		}
		key := string(p.GetData())
		if !validKey(key) {
			return nil, fmt.Errorf("claimcheck: a reference's key %.80q is not a SHA-256 in hex", key)
		}
		ctx, cancel := c.context()
		data, err := c.Store.Get(ctx, key)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("claimcheck: reading payload %s: %w", key, err)
		}
		if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != key {
			return nil, fmt.Errorf("claimcheck: payload %s does not match its hash: the store's copy is corrupt", key)
		}
		var q commonpb.Payload
		if err := proto.Unmarshal(data, &q); err != nil {
			return nil, fmt.Errorf("claimcheck: payload %s: %w", key, err)
		}
		out[i] = &q
	}
	return out, nil
}

func (c *Codec) context() (context.Context, context.CancelFunc) {
	t := c.Timeout
	if t <= 0 {
		t = 30 * time.Second
	}
	return context.WithTimeout(context.Background(), t)
}

// validKey reports whether key is a lowercase hex SHA-256.
func validKey(key string) bool {
	if len(key) != 2*sha256.Size {
		return false
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
