package dev.rdmarun.scripts

import com.github.ajalt.clikt.completion.CompletionCandidates
import com.github.ajalt.clikt.completion.CompletionCandidates.Custom.ShellType
import com.github.ajalt.clikt.core.CliktCommand
import com.github.ajalt.clikt.core.PrintCompletionMessage
import com.github.ajalt.clikt.core.parse

/**
 * `rdma-run --generate-completion bash|zsh|fish`: clikt's completion script for the commands, and
 * what clikt cannot know: `rdma-run FILE.main.kts ...` is `rdma-run run FILE.main.kts ...`
 * ([withImplicitRun] puts the `run` in). Clikt's script alone takes the script name for a word that
 * is no command and offers only the root's options after it. The additions complete such a line as
 * the `run` line it stands for, so what follows a script name (the run options, files after
 * `--json` and `--histogram`) comes from ScenarioCommand's own declarations, as after `run`; and
 * they offer scripts, `*.main.kts` files, where a command name may go.
 */
internal object ShellCompletion {
    const val OPTION = "--generate-completion"
    val SHELLS = listOf("bash", "zsh", "fish")

    /** Lists the directories and `*.main.kts` files that complete $1 (bash; the additions define it). */
    private const val BASH_SCRIPTS = "__rdma_run_scripts"

    /** The completion function the additions register for rdma-run (bash). */
    private const val BASH_ENTRY = "_rdma_run_implicit_run"

    /** True when the line names a script before the word being completed (fish). */
    private const val FISH_IMPLICIT = "__rdma_run_implicit_run"

    /** What completes a scenario script: directories and `*.main.kts` files. */
    val SCRIPTS = CompletionCandidates.Custom { shell ->
        when (shell) {
            ShellType.BASH -> $$"local IFS=$'\\n'\nCOMPREPLY=($($$BASH_SCRIPTS \"${COMP_WORDS[COMP_CWORD]}\"))"
            ShellType.FISH -> "\"(__fish_complete_suffix .main.kts)\""
        }
    }

    /**
     * The script for [shell] (bash, zsh or fish): clikt's for [root]'s commands as [cliktTree] builds
     * them with clikt's own completion option (clikt generates its script only from there), then
     * the additions.
     */
    fun script(root: CliktCommand, shell: String, cliktTree: () -> CliktCommand): String {
        val clikt = try {
            cliktTree().parse(listOf(OPTION, shell))
            error("clikt's $OPTION printed no script")
        } catch (e: PrintCompletionMessage) {
            e.message.orEmpty()
        }
        return clikt.trimEnd() + "\n\n" + (if (shell == "fish") fish(root, clikt) else bash(root, clikt)) + "\n"
    }

    /** Bash, and zsh through its bashcompinit: a completion function in front of clikt's. */
    private fun bash(root: CliktCommand, clikt: String): String {
        val name = root.commandName
        // clikt's function for the root command (its naming), which the additions call.
        val cliktEntry = "_" + name.replace('-', '_')
        check(Regex("""(?m)^complete -F $cliktEntry $name$""").containsMatchIn(clikt)) { "clikt's script has no $cliktEntry for $name" }
        // The root's options that take a value: the word after one is that value, no script.
        val valued = root.registeredOptions().filter { it.nvalues.first > 0 }.flatMap { it.names + it.secondaryNames }
        val afterValued = if (valued.isEmpty()) "" else $$"case ${COMP_WORDS[k - 1]} in $${valued.joinToString("|")}) return ;; esac\n    "
        // $k, not k, in ${a[@]:0:$k}: zsh takes a letter there for a modifier.
        return $$"""
            |# $$name FILE.main.kts ... runs as $$name $${ScenarioCommand.NAME} FILE.main.kts ...: complete it as that line,
            |# and offer scripts where a command name may go. Added by rdma-run to clikt's script.
            |$$BASH_SCRIPTS() {
            |  compgen -d -S / -- "$1"
            |  compgen -f -X '!*.main.kts' -- "$1"
            |}
            |
            |$$BASH_ENTRY() {
            |  # The first word that is not an option, as the launcher finds it.
            |  local k=1
            |  while (( k < COMP_CWORD )) && [[ ${COMP_WORDS[k]} == -* ]]; do (( k++ )); done
            |  if (( k < COMP_CWORD )) && [[ ${COMP_WORDS[k]} == *.kts ]]; then
            |    COMP_WORDS=("${COMP_WORDS[@]:0:$k}" $${ScenarioCommand.NAME} "${COMP_WORDS[@]:$k}")
            |    (( COMP_CWORD++ ))
            |  fi
            |  $$cliktEntry "$@"
            |  if (( k == COMP_CWORD )) && [[ ${COMP_WORDS[k]} != -* ]]; then
            |    $${afterValued}local IFS=$'\n'
            |    COMPREPLY+=($($$BASH_SCRIPTS "${COMP_WORDS[k]}"))
            |  fi
            |  # A lone directory: no space after it, the path goes on.
            |  if (( ${#COMPREPLY[@]} == 1 )) && [[ ${COMPREPLY[0]} == */ ]]; then
            |    type compopt &>/dev/null && compopt -o nospace 2>/dev/null
            |  fi
            |  return 0
            |}
            |
            |complete -F $$BASH_ENTRY $$name
            """.trimMargin()
    }

    /**
     * Fish: clikt's lines for the run options once more, for a line that names a script instead of
     * `run`, and scripts where a command name may go.
     */
    private fun fish(root: CliktCommand, clikt: String): String {
        val name = root.commandName
        val afterRun = "-n \"__fish_seen_subcommand_from ${ScenarioCommand.NAME}\""
        // Only the option lines: the script argument is given already.
        val runOptions = clikt.lines().filter { afterRun in it && Regex(""" -[slo] \S""").containsMatchIn(it) }
        check(runOptions.isNotEmpty()) { "clikt's fish script has no option lines for ${ScenarioCommand.NAME}" }
        return $$"""
            |# $$name FILE.main.kts ... runs as $$name $${ScenarioCommand.NAME} FILE.main.kts ...: complete it as that line,
            |# and offer scripts where a command name may go. Added by rdma-run to clikt's script.
            |function $$FISH_IMPLICIT
            |    # The first word that is not an option, as the launcher finds it.
            |    set -l words (commandline -opc)
            |    set -e words[1]
            |    for w in $words
            |        string match -q -- '-*' $w; and continue
            |        string match -q -- '*.kts' $w
            |        return
            |    end
            |    return 1
            |end
            |complete -c $$name -f -n __fish_use_subcommand -a "(__fish_complete_suffix .main.kts)"
            |$${runOptions.joinToString("\n") { it.replace(afterRun, "-n $FISH_IMPLICIT") }}
            """.trimMargin()
    }
}
