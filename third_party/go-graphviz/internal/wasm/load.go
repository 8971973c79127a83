package wasm

import (
	"context"
	"fmt"
	"sync"

	"github.com/tetratelabs/wazero"
)

// This file is not in upstream go-graphviz (see PATCHES.md at the root of
// this copy). Upstream compiles the Graphviz module in this package's init,
// with a compilation cache under os.TempDir(), so every program that links
// go-graphviz compiles it at start, and panics before main when that cache
// belongs to another user. Here nothing runs at init: the module is
// compiled, in memory and without a cache, by the first Load, which each
// entry point of the packages above calls.

var (
	loadMu sync.Mutex
	loaded bool
	hooks  []func(context.Context) error
)

// OnLoad registers fn to run once the module is loaded, in the order of
// registration. It is for the init functions of the packages that need the
// module (upstream, they used it from init); call it only from init.
func OnLoad(fn func(context.Context) error) {
	hooks = append(hooks, fn)
}

// Load compiles and instantiates the Graphviz module and runs the OnLoad
// functions, once: after a success it returns nil at once. After a failure,
// nothing is kept and the next call tries again.
func Load(ctx context.Context) error {
	loadMu.Lock()
	defer loadMu.Unlock()
	if loaded {
		return nil
	}
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig())
	err := load(ctx, r)
	for _, fn := range hooks {
		if err != nil {
			break
		}
		err = fn(ctx)
	}
	if err != nil {
		mod = nil
		_ = r.Close(ctx)
		return fmt.Errorf("graphviz: loading the WebAssembly module: %w", err)
	}
	loaded = true
	if pendingFS != nil {
		mod.fs.subFS = pendingFS
		pendingFS = nil
	}
	return nil
}
