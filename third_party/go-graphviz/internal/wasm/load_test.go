package wasm

// Not in upstream go-graphviz (see PATCHES.md): run it with
// cd third_party/go-graphviz && go test ./internal/wasm

import (
	"context"
	"os"
	"testing"
)

// enums are the values that load reads from the module, as the packages
// above see them before the load (they copy some into variables of their
// own at init).
func enums() map[string]int {
	return map[string]int{
		"GRAPH":                     int(GRAPH),
		"NODE":                      int(NODE),
		"OUT_EDGE":                  int(OUT_EDGE),
		"IN_EDGE":                   int(IN_EDGE),
		"EDGE":                      int(EDGE),
		"WARN":                      int(WARN),
		"ERR":                       int(ERR),
		"MAX":                       int(MAX),
		"PREV":                      int(PREV),
		"IMAGE_TYPE_NULL":           int(IMAGE_TYPE_NULL),
		"IMAGE_TYPE_BMP":            int(IMAGE_TYPE_BMP),
		"IMAGE_TYPE_GIF":            int(IMAGE_TYPE_GIF),
		"IMAGE_TYPE_PNG":            int(IMAGE_TYPE_PNG),
		"IMAGE_TYPE_JPEG":           int(IMAGE_TYPE_JPEG),
		"IMAGE_TYPE_PDF":            int(IMAGE_TYPE_PDF),
		"IMAGE_TYPE_PS":             int(IMAGE_TYPE_PS),
		"IMAGE_TYPE_EPS":            int(IMAGE_TYPE_EPS),
		"IMAGE_TYPE_SVG":            int(IMAGE_TYPE_SVG),
		"IMAGE_TYPE_XML":            int(IMAGE_TYPE_XML),
		"IMAGE_TYPE_RIFF":           int(IMAGE_TYPE_RIFF),
		"IMAGE_TYPE_WEBP":           int(IMAGE_TYPE_WEBP),
		"IMAGE_TYPE_ICO":            int(IMAGE_TYPE_ICO),
		"IMAGE_TYPE_TIFF":           int(IMAGE_TYPE_TIFF),
		"ROOTGRAPH_OBJTYPE":         int(ROOTGRAPH_OBJTYPE),
		"CLUSTER_OBJTYPE":           int(CLUSTER_OBJTYPE),
		"NODE_OBJTYPE":              int(NODE_OBJTYPE),
		"EDGE_OBJTYPE":              int(EDGE_OBJTYPE),
		"MAP_RECTANGLE":             int(MAP_RECTANGLE),
		"MAP_CIRCLE":                int(MAP_CIRCLE),
		"MAP_POLYGON":               int(MAP_POLYGON),
		"EMIT_GDRAW":                int(EMIT_GDRAW),
		"EMIT_CDRAW":                int(EMIT_CDRAW),
		"EMIT_TDRAW":                int(EMIT_TDRAW),
		"EMIT_HDRAW":                int(EMIT_HDRAW),
		"EMIT_GLABEL":               int(EMIT_GLABEL),
		"EMIT_CLABEL":               int(EMIT_CLABEL),
		"EMIT_TLABEL":               int(EMIT_TLABEL),
		"EMIT_HLABEL":               int(EMIT_HLABEL),
		"EMIT_NDRAW":                int(EMIT_NDRAW),
		"EMIT_EDRAW":                int(EMIT_EDRAW),
		"EMIT_NLABEL":               int(EMIT_NLABEL),
		"EMIT_ELABEL":               int(EMIT_ELABEL),
		"EMIT_SORTED":               int(EMIT_SORTED),
		"EMIT_COLORS":               int(EMIT_COLORS),
		"EMIT_CLUSTERS_LAST":        int(EMIT_CLUSTERS_LAST),
		"EMIT_PREORDER":             int(EMIT_PREORDER),
		"EMIT_EDGE_SORTED":          int(EMIT_EDGE_SORTED),
		"DEVICE_DOES_PAGES":         int(DEVICE_DOES_PAGES),
		"DEVICE_DOES_LAYERS":        int(DEVICE_DOES_LAYERS),
		"DEVICE_EVENTS":             int(DEVICE_EVENTS),
		"DEVICE_DOES_TRUECOLOR":     int(DEVICE_DOES_TRUECOLOR),
		"DEVICE_BINARY_FORMAT":      int(DEVICE_BINARY_FORMAT),
		"DEVICE_COMPRESSED_FORMAT":  int(DEVICE_COMPRESSED_FORMAT),
		"DEVICE_NO_WRITER":          int(DEVICE_NO_WRITER),
		"RENDER_Y_GOES_DOWN":        int(RENDER_Y_GOES_DOWN),
		"RENDER_DOES_TRANSFORM":     int(RENDER_DOES_TRANSFORM),
		"RENDER_DOES_LABELS":        int(RENDER_DOES_LABELS),
		"RENDER_DOES_MAPS":          int(RENDER_DOES_MAPS),
		"RENDER_DOES_MAP_RECTANGLE": int(RENDER_DOES_MAP_RECTANGLE),
		"RENDER_DOES_MAP_CIRCLE":    int(RENDER_DOES_MAP_CIRCLE),
		"RENDER_DOES_MAP_POLYGON":   int(RENDER_DOES_MAP_POLYGON),
		"RENDER_DOES_MAP_ELLIPSE":   int(RENDER_DOES_MAP_ELLIPSE),
		"RENDER_DOES_MAP_BSPLINE":   int(RENDER_DOES_MAP_BSPLINE),
		"RENDER_DOES_TOOLTIPS":      int(RENDER_DOES_TOOLTIPS),
		"RENDER_DOES_TARGETS":       int(RENDER_DOES_TARGETS),
		"RENDER_DOES_Z":             int(RENDER_DOES_Z),
		"RENDER_NO_WHITE_BG":        int(RENDER_NO_WHITE_BG),
		"LAYOUT_NOT_REQUIRED":       int(LAYOUT_NOT_REQUIRED),
		"OUTPUT_NOT_REQUIRED":       int(OUTPUT_NOT_REQUIRED),
		"PEN_NONE":                  int(PEN_NONE),
		"PEN_DASHED":                int(PEN_DASHED),
		"PEN_DOTTED":                int(PEN_DOTTED),
		"PEN_SOLID":                 int(PEN_SOLID),
		"FILL_NONE":                 int(FILL_NONE),
		"FILL_SOLID":                int(FILL_SOLID),
		"FILL_LINEAR":               int(FILL_LINEAR),
		"FILL_RADIAL":               int(FILL_RADIAL),
		"FONT_REGULAR":              int(FONT_REGULAR),
		"FONT_BOLD":                 int(FONT_BOLD),
		"FONT_ITALIC":               int(FONT_ITALIC),
		"LABEL_PLAIN":               int(LABEL_PLAIN),
		"LABEL_HTML":                int(LABEL_HTML),
		"HSVA_DOUBLE":               int(HSVA_DOUBLE),
		"RGBA_BYTE":                 int(RGBA_BYTE),
		"RGBA_WORD":                 int(RGBA_WORD),
		"RGBA_DOUBLE":               int(RGBA_DOUBLE),
		"COLOR_STRING":              int(COLOR_STRING),
		"COLOR_INDEX":               int(COLOR_INDEX),
		"API_RENDER":                int(API_RENDER),
		"API_LAYOUT":                int(API_LAYOUT),
		"API_TEXTLAYOUT":            int(API_TEXTLAYOUT),
		"API_DEVICE":                int(API_DEVICE),
		"API_LOADIMAGE":             int(API_LOADIMAGE),
	}
}

// TestLoadIsLazy: nothing is loaded at init; Load loads once, writes
// nothing under TMPDIR, and the values it reads from the module are the
// ones the package had before, so no copy made at init is stale.
func TestLoadIsLazy(t *testing.T) {
	if mod != nil {
		t.Fatal("the module was loaded before the first Load")
	}
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	before := enums()
	if err := Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	if mod == nil {
		t.Fatal("Load did not set the module")
	}
	if err := Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	for name, v := range enums() {
		if before[name] != v {
			t.Errorf("%s is %d before the load, %d after", name, before[name], v)
		}
	}
	if entries, _ := os.ReadDir(tmp); len(entries) != 0 {
		t.Errorf("Load wrote %d entries under TMPDIR", len(entries))
	}
}
