//go:build !svg

package main

import "github.com/agentfsm/agentfsm/transitions"

// svgBuilt reports whether this binary draws SVG itself.
const svgBuilt = false

// renderSVG, without the build tag svg, draws nothing.
func renderSVG([]transitions.Rule) ([]byte, error) { return nil, errNoSVG }
