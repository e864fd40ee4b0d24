"""``streamtts completion bash``: a bash completion script. Subcommands and options complete from
the parser itself; ``-v``/``--voice`` completes the voices the server offers (``streamtts voices
--ids``, asked of ``--url`` or ``STREAMTTS_URL`` when the user presses Tab)."""

from __future__ import annotations

import argparse

# The script's one moving part is the table of options per subcommand, filled in from the parser.
BASH = r"""# bash completion for streamtts: eval "$(streamtts completion bash)" (e.g. in ~/.bashrc)
_streamtts() {
    local cur prev sub i url
    cur=${COMP_WORDS[COMP_CWORD]}
    prev=${COMP_WORDS[COMP_CWORD-1]}
    sub=""
    for ((i = 1; i < COMP_CWORD; i++)); do
        case ${COMP_WORDS[i]} in -*) ;; *) sub=${COMP_WORDS[i]}; break ;; esac
    done
    if [[ $prev == -v || $prev == --voice ]]; then
        url=""
        for ((i = 1; i < COMP_CWORD; i++)); do
            [[ ${COMP_WORDS[i]} == --url ]] && url=${COMP_WORDS[i+1]}
        done
        mapfile -t COMPREPLY < <(compgen -W "$(streamtts voices --ids ${url:+--url "$url"} 2>/dev/null)" -- "$cur")
        return
    fi
    case $sub in
%(cases)s
        *) mapfile -t COMPREPLY < <(compgen -W "%(commands)s" -- "$cur") ;;
    esac
}
complete -o default -F _streamtts streamtts
"""


def add_completion(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("completion", help="print a shell completion script (bash)")
    parser.add_argument("shell", choices=["bash"], help="the shell")
    parser.set_defaults(func=lambda args: print_script(commands))


def print_script(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> int:
    cases = []
    for name, sub in commands.choices.items():
        options = sorted({o for action in sub._actions for o in action.option_strings})
        cases.append(f'        {name}) mapfile -t COMPREPLY < <(compgen -W "{" ".join(options)}" -- "$cur") ;;')
    print(BASH % {"cases": "\n".join(cases), "commands": " ".join(commands.choices)}, end="")
    return 0
