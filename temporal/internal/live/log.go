package live

// quiet is a client logger that drops everything: the tests read the
// session's events, not the SDK's chatter.
type quiet struct{}

func (quiet) Debug(string, ...any) {}
func (quiet) Info(string, ...any)  {}
func (quiet) Warn(string, ...any)  {}
func (quiet) Error(string, ...any) {}
