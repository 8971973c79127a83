package main

import (
	"fmt"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/agentfsm/agentfsm/cmd/agentfsm/view"
	"github.com/agentfsm/agentfsm/events"
)

// The terminal demo runs on Bubble Tea: it owns the raw terminal, reads Esc
// and Ctrl-C as keys without Enter, and redraws the log's last lines and the
// spinner in place. The log lives in the model (not in tea.Println commands,
// which Bubble Tea runs concurrently and so may reorder).

type (
	eventMsg    struct{ ev events.Event }
	headerMsg   string
	scenarioEnd string
	allDone     struct{}
	tickMsg     time.Time
)

var spinnerFrames = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

type tuiModel struct {
	demo   *demo
	view   view.Model
	frame  int
	ctrlC  int
	log    []string
	height int
}

func (m *tuiModel) println(lines ...string) {
	for _, l := range lines {
		m.log = append(m.log, strings.Split(l, "\n")...)
	}
}

func (m *tuiModel) Init() tea.Cmd { return tick() }

func tick() tea.Cmd {
	return tea.Tick(100*time.Millisecond, func(t time.Time) tea.Msg { return tickMsg(t) })
}

func (m *tuiModel) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.KeyPressMsg:
		switch msg.String() {
		case "esc":
			m.ctrlC = 0
			esc := m.view.Esc()
			go act(m.demo.session(), esc)
			m.println("  key    esc: " + esc.String())
		case "ctrl+c":
			m.ctrlC++
			if m.ctrlC >= 2 {
				m.demo.stop()
				m.println("  key    ctrl+c twice: quit")
				return m, tea.Quit
			}
			// Once: cancel a pending retry, else abort what runs.
			esc := m.view.Esc()
			if esc == view.EscNothing {
				esc = view.EscAbort
			}
			go act(m.demo.session(), esc)
			m.println("  key    ctrl+c: " + esc.String() + " (ctrl+c again to quit)")
		}
	case tea.WindowSizeMsg:
		m.height = msg.Height
	case eventMsg:
		m.view.Apply(msg.ev, time.Now())
		if line := describe(msg.ev); line != "" {
			m.println(line)
		}
		for _, l := range m.view.TakeLines() {
			m.println("  view   " + strings.ReplaceAll(l, "\n", "\n         "))
		}
	case headerMsg:
		m.println(string(msg))
	case scenarioEnd:
		m.println(string(msg))
	case allDone:
		return m, tea.Quit
	case tickMsg:
		m.frame = (m.frame + 1) % len(spinnerFrames)
		return m, tick()
	}
	return m, nil
}

func (m *tuiModel) View() tea.View {
	log := visible(m.log, m.height, 2)
	line := ""
	if sp := m.view.Spinner(time.Now()); sp != "" {
		line = spinnerFrames[m.frame] + " " + sp
	}
	return tea.NewView(strings.Join(log, "\n") + "\n" + line + "\n")
}

// stop ends the demo: the scenario being played is aborted and no other
// starts.
func (d *demo) stop() {
	d.mu.Lock()
	d.quit = true
	s := d.current
	d.mu.Unlock()
	if s != nil {
		go s.Abort()
	}
}

// runTUI plays the scenarios on a terminal: a live countdown spinner, Esc to
// cancel, Ctrl-C twice to quit.
func (d *demo) runTUI(env *environment) int {
	m := &tuiModel{demo: d}
	p := tea.NewProgram(m, tea.WithInput(env.stdin), tea.WithOutput(env.stdout))
	go func() {
		p.Send(headerMsg(fmt.Sprintf("agentfsm demo: %d scenario(s), first retry delay %d ms (the library's default is 2000).\nEsc cancels a retry; Ctrl-C twice quits.",
			len(d.scenarios), d.baseDelay)))
		for _, sc := range d.scenarios {
			d.mu.Lock()
			quit := d.quit
			d.mu.Unlock()
			if quit {
				break
			}
			p.Send(headerMsg(fmt.Sprintf("\n== %s: %s", sc.name, sc.about)))
			out := d.play(sc, func(ev events.Event) { p.Send(eventMsg{ev}) })
			p.Send(scenarioEnd(fmt.Sprintf("outcome: %s: %s", sc.name, out)))
		}
		p.Send(allDone{})
	}()
	if _, err := p.Run(); err != nil {
		fmt.Fprintf(env.stderr, "agentfsm demo: %v\n", err)
		return 1
	}
	return 0
}

// visible is the end of log that fits a terminal of height rows, reserved
// of them kept for what follows it (20 rows when the height is unknown or
// too small).
func visible(log []string, height, reserved int) []string {
	rows := height - reserved
	if rows < 5 {
		rows = 20
	}
	if len(log) > rows {
		return log[len(log)-rows:]
	}
	return log
}
