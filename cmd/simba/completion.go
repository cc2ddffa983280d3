//go:build unix

package main

import (
	"flag"
	"fmt"
	"strings"
)

// cmdCompletion implements simba completion bash|zsh: a script generated
// from the commands and their flag definitions (zsh runs the bash one
// through bashcompinit).
func (c *cli) cmdCompletion(f *flags) error {
	if len(f.args) != 1 || f.args[0] != "bash" && f.args[0] != "zsh" {
		return fail(codeUsage, "completion: want bash or zsh (usage: simba completion bash|zsh)")
	}
	var b strings.Builder
	if f.args[0] == "zsh" {
		b.WriteString("autoload -U +X bashcompinit && bashcompinit\n")
	}
	var names []string
	for _, d := range commandList {
		names = append(names, d.name)
	}
	b.WriteString(`_simba() {
	local cur=${COMP_WORDS[COMP_CWORD]} w flags
	if [ "$COMP_CWORD" -eq 1 ]; then
		COMPREPLY=($(compgen -W "` + strings.Join(names, " ") + ` help --version" -- "$cur"))
		return
	fi
	for w in "${COMP_WORDS[@]:2:COMP_CWORD-2}"; do
		if [ "$w" = -- ]; then
			COMPREPLY=($(compgen -c -- "$cur"))
			return
		fi
	done
	case ${COMP_WORDS[1]} in
`)
	for _, d := range commandList {
		var fl []string
		c.newFlags(d.name).VisitAll(func(x *flag.Flag) { fl = append(fl, "--"+x.Name) })
		fmt.Fprintf(&b, "\t%s) flags=%q ;;\n", d.name, strings.Join(fl, " "))
	}
	b.WriteString(`	help) COMPREPLY=($(compgen -W "` + strings.Join(names, " ") + `" -- "$cur")); return ;;
	esac
	case $cur in
	-*) COMPREPLY=($(compgen -W "$flags" -- "$cur")) ;;
	esac
}
complete -o default -F _simba simba
`)
	_, err := fmt.Fprint(c.stdout, b.String())
	return err
}
