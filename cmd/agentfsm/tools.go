package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/agentfsm/agentfsm/providers/anthropic"
	"github.com/agentfsm/agentfsm/providers/openai"
)

// The read-only tools of "chat --tools": read a file and list a directory,
// both within the directory the command runs in. A path that leaves it
// (.., an absolute path, a symbolic link out) is refused: the tool's error
// goes back to the model as a tool result with isError.

// maxReadBytes bounds what the read tool returns of a file.
const maxReadBytes = 64 << 10

// maxListEntries bounds what the list tool returns of a directory.
const maxListEntries = 1000

// tool is one tool, before it is given to a provider's adapter.
type tool struct {
	name, description string
	schema            json.RawMessage
	run               func(ctx context.Context, args json.RawMessage) (string, error)
}

// pathSchema is the schema of a tool that takes one path.
const pathSchema = `{"type":"object","properties":{"path":{"type":"string","description":"a path relative to the working directory"}},"required":["path"]}`

// readOnlyTools returns the tools over root.
func readOnlyTools(root *os.Root) []tool {
	return []tool{
		{name: "read", description: "Reads a text file under the working directory and returns its content (at most 64 KiB).",
			schema: json.RawMessage(pathSchema), run: func(_ context.Context, args json.RawMessage) (string, error) {
				p, err := toolPath(args, false)
				if err != nil {
					return "", err
				}
				return readFile(root, p)
			}},
		{name: "list", description: "Lists a directory under the working directory: one entry a line, directories ending in /.",
			schema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"a directory relative to the working directory; . when empty"}}}`),
			run: func(_ context.Context, args json.RawMessage) (string, error) {
				p, err := toolPath(args, true)
				if err != nil {
					return "", err
				}
				return listDir(root, p)
			}},
	}
}

// toolPath is the "path" argument, cleaned; it refuses a path that is not
// within the working directory.
func toolPath(args json.RawMessage, optional bool) (string, error) {
	var a struct {
		Path *string `json:"path"`
	}
	if err := json.Unmarshal(args, &a); err != nil {
		return "", fmt.Errorf("the arguments are not {\"path\": string}: %v", err)
	}
	p := "."
	switch {
	case a.Path != nil && *a.Path != "":
		p = *a.Path
	case !optional:
		return "", errors.New(`"path" is required`)
	}
	if strings.HasPrefix(p, "/") || !fs.ValidPath(path.Clean(p)) {
		return "", fmt.Errorf("%q is outside the working directory", p)
	}
	return path.Clean(p), nil
}

// readFile returns the text of the file at p under root, cut to
// maxReadBytes with a note.
func readFile(root *os.Root, p string) (string, error) {
	// Stat first: opening a named pipe or a device could block the turn.
	info, err := root.Stat(p)
	switch {
	case err != nil:
		return "", rootError(p, err)
	case info.IsDir():
		return "", fmt.Errorf("%s is a directory: use list", p)
	case !info.Mode().IsRegular():
		return "", fmt.Errorf("%s is not a regular file", p)
	}
	f, err := root.Open(p)
	if err != nil {
		return "", rootError(p, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxReadBytes+1))
	if err != nil {
		return "", rootError(p, err)
	}
	cut := len(data) > maxReadBytes
	if cut {
		// Drop a rune the cut split (at most 3 bytes), no more.
		data = data[:maxReadBytes]
		for i := 0; i < utf8.UTFMax-1 && len(data) > 0 && !utf8.Valid(data); i++ {
			data = data[:len(data)-1]
		}
	}
	if !utf8.Valid(data) {
		return "", fmt.Errorf("%s is not a text file", p)
	}
	if cut {
		return string(data) + fmt.Sprintf("\n[... cut at %d bytes of %d]", len(data), info.Size()), nil
	}
	return string(data), nil
}

// listDir returns the entries of the directory at p under root.
func listDir(root *os.Root, p string) (string, error) {
	info, err := root.Stat(p)
	switch {
	case err != nil:
		return "", rootError(p, err)
	case !info.IsDir():
		return "", fmt.Errorf("%s is not a directory: use read", p)
	}
	f, err := root.Open(p)
	if err != nil {
		return "", rootError(p, err)
	}
	defer f.Close()
	entries, err := f.ReadDir(maxListEntries + 1)
	if err != nil && err != io.EOF {
		return "", rootError(p, err)
	}
	var names []string
	for _, e := range entries[:min(len(entries), maxListEntries)] {
		name := e.Name()
		if e.IsDir() {
			name += "/"
		}
		names = append(names, name)
	}
	sort.Strings(names)
	out := strings.Join(names, "\n")
	if len(entries) > maxListEntries {
		out += fmt.Sprintf("\n[... more than %d entries]", maxListEntries)
	}
	if out == "" {
		out = "(empty)"
	}
	return out, nil
}

// rootError says what went wrong with p, without the absolute path of the
// working directory.
func rootError(p string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	if strings.Contains(err.Error(), "escapes from parent") || strings.Contains(err.Error(), "path escapes") {
		return fmt.Errorf("%q is outside the working directory", p)
	}
	return fmt.Errorf("%s: %v", p, err)
}

// anthropicTools are tools as the Anthropic adapter takes them.
func anthropicTools(tools []tool) []anthropic.Tool {
	var out []anthropic.Tool
	for _, t := range tools {
		out = append(out, anthropic.Tool{Name: t.name, Description: t.description, Schema: t.schema, Run: t.run})
	}
	return out
}

// openaiTools are tools as the OpenAI adapter takes them.
func openaiTools(tools []tool) []openai.Tool {
	var out []openai.Tool
	for _, t := range tools {
		out = append(out, openai.Tool{Name: t.name, Description: t.description, Schema: t.schema, Run: t.run})
	}
	return out
}
