package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/agentfsm/agentfsm/cmd/agentfsm/view"
	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/session"
)

// The interactive chat: a line to type a prompt into, the answer streamed as
// it arrives, the retry countdown and the compaction notice of the view
// model; Esc does what the view says (cancel a retry or a compaction, or
// abort the answer), Ctrl-C aborts a turn and, when none runs, quits.

type turnDone struct{ err error }

type chatModel struct {
	s       *session.Session
	timeout time.Duration // a turn's limit; 0: none
	narr    *narrator     // what the turn was retrying when it ended
	send    func(tea.Msg)
	view    view.Model
	log     []string
	input   []rune
	stream  string // the answer so far
	busy    bool
	frame   int
	height  int
}

func (m *chatModel) println(lines ...string) {
	for _, l := range lines {
		for _, line := range strings.Split(l, "\n") {
			m.log = append(m.log, terminalSafe(line, false))
		}
	}
}

func (m *chatModel) Init() tea.Cmd { return tick() }

func (m *chatModel) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.KeyPressMsg:
		switch msg.String() {
		case "enter":
			p := strings.TrimSpace(string(m.input))
			if m.busy || p == "" {
				break
			}
			m.input, m.busy, m.stream = nil, true, ""
			m.println("you> " + p)
			go func() {
				err := prompt(context.Background(), m.s, p, m.timeout)
				m.s.Flush()
				m.send(turnDone{err})
			}()
		case "backspace":
			if len(m.input) > 0 {
				m.input = m.input[:len(m.input)-1]
			}
		case "esc":
			esc := m.view.Esc()
			go act(m.s, esc)
		case "ctrl+c":
			if !m.busy {
				return m, tea.Quit
			}
			go m.s.Abort()
		default:
			if t := msg.Key().Text; t != "" {
				m.input = append(m.input, []rune(t)...)
			}
		}
	case tea.WindowSizeMsg:
		m.height = msg.Height
	case eventMsg:
		m.view.Apply(msg.ev, time.Now())
		switch e := msg.ev.(type) {
		case events.MessageUpdate:
			if e.Delta.Kind == "text" {
				m.stream = e.Message.Text()
			}
		case events.MessageStart:
			m.stream = ""
		}
		for _, l := range m.view.TakeLines() {
			m.println("  " + l)
		}
	case turnDone:
		m.busy, m.stream = false, ""
		if msg.err != nil {
			m.println("error: " + turnError(msg.err, m.timeout, m.narr))
		} else {
			m.println("assistant> " + answer(m.s.Messages()))
		}
	case tickMsg:
		m.frame = (m.frame + 1) % len(spinnerFrames)
		return m, tick()
	}
	return m, nil
}

func (m *chatModel) View() tea.View {
	log := visible(m.log, m.height, 4)
	var b strings.Builder
	b.WriteString(strings.Join(log, "\n"))
	b.WriteString("\n")
	if m.busy && m.stream != "" {
		b.WriteString("assistant> " + terminalSafe(m.stream, true) + "\n")
	}
	if sp := m.view.Spinner(time.Now()); sp != "" {
		b.WriteString(spinnerFrames[m.frame] + " " + sp + "\n")
	}
	b.WriteString("> " + string(m.input) + "\n")
	return tea.NewView(b.String())
}

// runChatTUI runs the interactive chat on s until Ctrl-C with no turn in
// flight.
func runChatTUI(s *session.Session, env *environment, timeout time.Duration, narr *narrator) int {
	m := &chatModel{s: s, timeout: timeout, narr: narr}
	m.println(fmt.Sprintf("agentfsm chat: %s %s. Enter sends; Esc cancels a retry or stops the answer; Ctrl-C quits.",
		s.Model().Provider, s.Model().ID))
	p := tea.NewProgram(m, tea.WithInput(env.stdin), tea.WithOutput(env.stdout))
	m.send = p.Send
	unsubscribe := s.Subscribe(func(ev events.Event) { p.Send(eventMsg{ev}) })
	defer unsubscribe()
	if _, err := p.Run(); err != nil {
		fmt.Fprintf(env.stderr, "agentfsm chat: %v\n", err)
		return 1
	}
	s.Abort()
	return 0
}
