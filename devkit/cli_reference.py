"""Render docs/cli.md's command reference and exit-code table from the click app itself
(saga_index_cli.main.cli) and its one exit-code enumeration (saga_index_cli.exit_codes).

    python -m devkit.cli_reference            rewrite the generated sections of the doc
    python -m devkit.cli_reference --check    exit 1 if the doc's sections are not what this writes

Each section sits between two markers in the doc, `<!-- cli-reference:NAME -->` and
`<!-- /cli-reference:NAME -->`; the text around them is the doc's own. The reference names every
command, its usage, its help as `--help` prints it, and every option with its value, default,
environment variable and help; hidden options (test hooks) are left out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import click
from click.core import UNSET

from devkit.doc_blocks import generator_main, render_blocks
from saga_index_cli.exit_codes import ExitCode
from saga_index_cli.main import PROG_NAME, cli

DEFAULT_PATH = Path(__file__).resolve().parent.parent / "docs" / "cli.md"
# The width the help text is wrapped at, whatever the terminal that runs this.
_WIDTH = 100


def _commands(
    command: click.Command, path: tuple[str, ...], parent: click.Context | None
) -> Iterator[tuple[click.Context, click.Command]]:
    """Every command under `command`, depth first, in the order `--help` lists them."""
    ctx = click.Context(
        command, info_name=path[-1], parent=parent, max_content_width=_WIDTH, terminal_width=_WIDTH
    )
    yield ctx, command
    if isinstance(command, click.Group):
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is not None and not sub.hidden:
                yield from _commands(sub, (*path, name), ctx)


def _cell(text: str) -> str:
    return " ".join(text.replace("\\b", "").split()).replace("|", "\\|")


def _default(ctx: click.Context, option: click.Option) -> str:
    if option.is_flag and not option.secondary_opts:
        return ""
    value: Any = option.get_default(ctx, call=False)
    if value is None or value is UNSET or callable(value):
        return ""
    if option.is_flag:
        return f"`{(option.opts if value else option.secondary_opts)[0]}`"
    return f"`{value}`"


def _value(ctx: click.Context, option: click.Option) -> str:
    if option.is_flag and not option.secondary_opts:
        return ""
    if option.metavar:
        return option.metavar.replace("|", "\\|")
    shown = option.make_metavar(ctx)
    describe = getattr(option.type, "_describe_range", None)
    if isinstance(option.type, click.types._NumberRangeBase) and describe is not None:
        shown = f"{option.type.name.split()[0].upper()} {describe()}"
    return shown.replace("|", "\\|")


def _names(option: click.Option) -> str:
    names = [*option.opts, *option.secondary_opts]
    return ", ".join(f"`{name}`" for name in names)


def _envvar(option: click.Option) -> str:
    names = option.envvar
    if not names:
        return ""
    return ", ".join(f"`{name}`" for name in ([names] if isinstance(names, str) else names))


def _options_table(ctx: click.Context, command: click.Command) -> list[str]:
    options = [p for p in command.params if isinstance(p, click.Option) and not p.hidden]
    if not options:
        return []
    lines = ["| option | value | default | environment | help |", "| --- | --- | --- | --- | --- |"]
    for option in options:
        lines.append(
            f"| {_names(option)} | {_value(ctx, option)} | {_default(ctx, option)} | "
            f"{_envvar(option)} | {_cell(option.help or '')} |"
        )
    return lines


def _help_text(ctx: click.Context, command: click.Command) -> str:
    formatter = ctx.make_formatter()
    command.format_help_text(ctx, formatter)
    lines = formatter.getvalue().rstrip().splitlines()
    return "\n".join(line[2:] if line.startswith("  ") else line for line in lines).strip("\n")


def render_reference() -> str:
    """Every command: its usage, help and options."""
    out: list[str] = []
    for ctx, command in _commands(cli, (PROG_NAME,), None):
        path = ctx.command_path
        out += [f"### `{path}`", "", "```text", " ".join(command.collect_usage_pieces(ctx)), "```"]
        out[-2] = f"{path} {out[-2]}".rstrip()
        text = _help_text(ctx, command)
        if text:
            out += ["", "```text", text, "```"]
        table = _options_table(ctx, command)
        if table:
            out += ["", *table]
        if isinstance(command, click.Group):
            subs = [n for n in command.list_commands(ctx) if not command.commands[n].hidden]
            out += ["", "Commands: " + ", ".join(f"`{path} {name}`" for name in subs) + "."]
        out.append("")
    return "\n".join(out).rstrip()


def render_exit_codes() -> str:
    lines = ["| code | name | meaning |", "| --- | --- | --- |"]
    for code in ExitCode:
        lines.append(f"| {int(code)} | `{code.name}` | {_cell(code.meaning)} |")
    return "\n".join(lines)


SECTIONS: dict[str, Callable[[], str]] = {
    "exit-codes": render_exit_codes,
    "commands": render_reference,
}


def render_doc(text: str) -> str:
    """`text` with every generated section between its markers replaced."""
    return render_blocks(text, "cli-reference", SECTIONS)


def main(argv: Sequence[str] | None = None) -> int:
    return generator_main(
        argv,
        module="devkit.cli_reference",
        description=__doc__,
        default_path=DEFAULT_PATH,
        render_doc=render_doc,
        what="CLI reference and exit codes",
    )


if __name__ == "__main__":
    raise SystemExit(main())
