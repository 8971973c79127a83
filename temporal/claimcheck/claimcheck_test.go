package claimcheck_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"

	"github.com/agentfsm/agentfsm/temporal/claimcheck"
)

func newCodec(t *testing.T) (*claimcheck.Codec, string) {
	t.Helper()
	dir := t.TempDir()
	store, err := claimcheck.NewDir(dir)
	require.NoError(t, err)
	return &claimcheck.Codec{Store: store}, dir
}

// files lists the files under dir.
func files(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	require.NoError(t, filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			out = append(out, p)
		}
		return err
	}))
	return out
}

// A payload above the threshold becomes a reference of a few bytes, the
// same for the same content, stored once; one at or below it passes as
// it is; the data converter gives back the values.
func TestLargePayloadsBecomeReferences(t *testing.T) {
	codec, dir := newCodec(t)
	dc := converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), codec)
	big := strings.Repeat("context ", 1000)
	p1, err := dc.ToPayloads(big, "small")
	require.NoError(t, err)
	p2, err := dc.ToPayloads(big, "small")
	require.NoError(t, err)
	require.Len(t, p1.Payloads, 2)
	assert.Equal(t, claimcheck.Encoding, string(p1.Payloads[0].Metadata["encoding"]))
	assert.Len(t, p1.Payloads[0].Data, 64)
	assert.Equal(t, p1.Payloads[0].Data, p2.Payloads[0].Data, "the reference is the content's: deterministic")
	assert.Equal(t, "json/plain", string(p1.Payloads[1].Metadata["encoding"]), "a small payload is left as it is")
	assert.Len(t, files(t, dir), 1, "identical payloads are stored once")
	var gotBig, gotSmall string
	require.NoError(t, dc.FromPayloads(p1, &gotBig, &gotSmall))
	assert.Equal(t, big, gotBig)
	assert.Equal(t, "small", gotSmall)
}

// A reference whose stored copy was changed, removed, or whose key names
// a path is refused with an error that says so; nothing is read outside
// the store's directory.
func TestBadReferencesAreRefused(t *testing.T) {
	codec, dir := newCodec(t)
	enc, err := codec.Encode([]*commonpb.Payload{{Metadata: map[string][]byte{"encoding": []byte("binary/plain")}, Data: make([]byte, 5000)}})
	require.NoError(t, err)
	key := string(enc[0].Data)
	stored := filepath.Join(dir, key[:2], key)
	require.FileExists(t, stored)

	require.NoError(t, os.WriteFile(stored, []byte("tampered"), 0o600))
	_, err = codec.Decode(enc)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "does not match its hash")

	require.NoError(t, os.Remove(stored))
	_, err = codec.Decode(enc)
	require.ErrorIs(t, err, claimcheck.ErrNotFound)

	for _, bad := range []string{"../../../etc/passwd", "", strings.Repeat("A", 64), strings.Repeat("a", 63) + "/", strings.Repeat("0", 65)} {
		ref := &commonpb.Payload{Metadata: map[string][]byte{"encoding": []byte(claimcheck.Encoding)}, Data: []byte(bad)}
		_, err := codec.Decode([]*commonpb.Payload{ref})
		require.Error(t, err, "key %q", bad)
		assert.Contains(t, err.Error(), "is not a SHA-256 in hex")
	}
	var nilStore claimcheck.Codec
	_, err = nilStore.Encode(enc)
	assert.ErrorContains(t, err, "Codec.Store is nil")
}

// The directory store validates keys (no path outside it), writes
// atomically (no temporary file left), keeps the first copy of a key, and
// says when a key is missing.
func TestDirStore(t *testing.T) {
	dir := t.TempDir()
	store, err := claimcheck.NewDir(dir)
	require.NoError(t, err)
	ctx := context.Background()
	data := []byte("a payload")
	sum := sha256.Sum256(data)
	key := hex.EncodeToString(sum[:])
	require.NoError(t, store.Put(ctx, key, data))
	require.NoError(t, store.Put(ctx, key, data))
	got, err := store.Get(ctx, key)
	require.NoError(t, err)
	assert.Equal(t, data, got)
	assert.Equal(t, []string{filepath.Join(dir, key[:2], key)}, files(t, dir))

	for _, bad := range []string{"../x", "/etc/passwd", key + "/..", strings.ToUpper(key)} {
		assert.ErrorContains(t, store.Put(ctx, bad, data), "is not a SHA-256 in hex")
		_, err := store.Get(ctx, bad)
		assert.ErrorContains(t, err, "is not a SHA-256 in hex")
	}
	_, err = store.Get(ctx, strings.Repeat("ab", 32))
	assert.True(t, errors.Is(err, claimcheck.ErrNotFound))

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	assert.ErrorIs(t, store.Put(cancelled, strings.Repeat("cd", 32), data), context.Canceled)
	_, err = claimcheck.NewDir("")
	assert.ErrorContains(t, err, "directory is empty")
}

// A key's path that holds something other than its payload (a symbolic
// link elsewhere, a copy cut short) is mended by the next Put of the key:
// the store then gives back the payload, from a regular file in it,
// instead of failing every Get.
func TestDirPutMendsADamagedKey(t *testing.T) {
	dir := t.TempDir()
	store, err := claimcheck.NewDir(dir)
	require.NoError(t, err)
	ctx := context.Background()
	data := []byte("the payload's content")
	sum := sha256.Sum256(data)
	key := hex.EncodeToString(sum[:])
	p := filepath.Join(dir, key[:2], key)
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o750))

	outside := filepath.Join(t.TempDir(), "elsewhere")
	require.NoError(t, os.WriteFile(outside, []byte("something else"), 0o600))
	require.NoError(t, os.Symlink(outside, p))
	require.NoError(t, store.Put(ctx, key, data))
	fi, err := os.Lstat(p)
	require.NoError(t, err)
	assert.True(t, fi.Mode().IsRegular(), "the link was replaced by the payload")
	got, err := store.Get(ctx, key)
	require.NoError(t, err)
	assert.Equal(t, data, got)
	kept, err := os.ReadFile(outside)
	require.NoError(t, err)
	assert.Equal(t, "something else", string(kept), "nothing outside the store was written")

	require.NoError(t, os.WriteFile(p, data[:5], 0o600))
	require.NoError(t, store.Put(ctx, key, data))
	got, err = store.Get(ctx, key)
	require.NoError(t, err)
	assert.Equal(t, data, got, "a copy cut short was written again")
	assert.Equal(t, []string{p}, files(t, dir), "no temporary file is left")
}
