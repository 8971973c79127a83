package claimcheck

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Dir is a Store in a directory of the local file system: one file per
// key, under a subdirectory named by the key's first two characters. It
// serves the workers of one host (or a file system they share). Each
// write goes to a temporary file renamed into place, so a reader never
// sees a partial payload, and a crash leaves at worst a temporary file.
type Dir struct {
	root string
}

// NewDir returns the store in directory root, which it creates if need
// be.
func NewDir(root string) (*Dir, error) {
	if root == "" {
		return nil, errors.New("claimcheck: the store's directory is empty")
	}
	if err := os.MkdirAll(root, 0o750); err != nil {
		return nil, fmt.Errorf("claimcheck: %w", err)
	}
	return &Dir{root: root}, nil
}

// path returns key's file, or an error for a key that is not a SHA-256 in
// hex (so no key names a path outside the directory).
func (d *Dir) path(key string) (string, error) {
	if !validKey(key) {
		return "", fmt.Errorf("claimcheck: key %.80q is not a SHA-256 in hex", key)
	}
	return filepath.Join(d.root, key[:2], key), nil
}

// Put writes data under key, unless the key is already there: a regular
// file of data's size. Anything else at the key's path (a symbolic link,
// a directory entry of another kind, a file of another size, as a copy
// cut short or changed by hand leaves) is replaced, so that a store that
// was damaged mends on the next Put of the key instead of failing each
// Get.
func (d *Dir) Put(ctx context.Context, key string, data []byte) error {
	p, err := d.path(key)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("claimcheck: %w", err)
	}
	if fi, err := os.Lstat(p); err == nil && fi.Mode().IsRegular() && fi.Size() == int64(len(data)) {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
		return fmt.Errorf("claimcheck: %w", err)
	}
	f, err := os.CreateTemp(filepath.Dir(p), ".tmp-"+key[:8]+"-*")
	if err != nil {
		return fmt.Errorf("claimcheck: %w", err)
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, p)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("claimcheck: writing payload %s: %w", key, err)
	}
	return nil
}

// Get reads key's content.
func (d *Dir) Get(ctx context.Context, key string) ([]byte, error) {
	p, err := d.path(key)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("claimcheck: %w", err)
	}
	data, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, key)
	}
	if err != nil {
		return nil, fmt.Errorf("claimcheck: %w", err)
	}
	return data, nil
}
