"""The slice of POSIX shell syntax that ADB clients actually send to a device.

Clients join argv with spaces and quote with single quotes (adbutils uses ``shlex.quote``), chain with
``;`` (adbutils appends ``; echo X4EXIT:$?`` to learn the exit code over shell v1), and now and then
pipe into ``grep`` or redirect to a file; adbutils' screen recorder pushes a small script that runs
``screenrecord "$1" &``, keeps ``PID=$!``, waits on ``read`` and stops it with ``kill -INT $PID; wait``.
Supported: words with '...' "..." and backslash quoting, parameters (``$?`` ``$!`` ``$$`` ``$#`` ``$0``..``$9``
``$NAME`` ``${NAME}``, expanded without field splitting), ``NAME=value`` assignments, ``#`` comments,
newlines, ``;`` ``&&`` ``||`` ``&`` (background), ``|``, and the redirections ``>`` ``>>`` ``2>`` ``2>>``
``2>&1`` ``&>``. Anything else (``$(...)``, globbing, control flow) stays literal text.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field


class ShellSyntaxError(ValueError):
    pass


@dataclass(frozen=True)
class Parameter:
    """A ``$name`` inside a word (``?``, ``!``, ``1``, ``PID`` ...); replaced when the command runs."""

    name: str

    def __repr__(self) -> str:
        return "$" + self.name


EXIT_STATUS = Parameter("?")

WordPart = str | Parameter

# What may follow '$': a special parameter, a positional one, a name, or a braced name.
_PARAMETER = re.compile(r"\$(?:([?!$#0-9])|([A-Za-z_][A-Za-z0-9_]*)|\{([A-Za-z_][A-Za-z0-9_]*|[?!$#0-9])\})")


@dataclass
class Word:
    parts: list[WordPart] = field(default_factory=list)

    def expand(self, parameters: int | Mapping[str, str]) -> str:
        """The word's text; ``parameters`` is the shell's variables, or just the last exit status."""
        values = {"?": str(parameters)} if isinstance(parameters, int) else parameters
        return "".join(part if isinstance(part, str) else values.get(part.name, "") for part in self.parts)

    def literal_prefix(self) -> str:
        """The text before the first parameter, e.g. ``PID=`` of ``PID=$!``."""
        return self.parts[0] if self.parts and isinstance(self.parts[0], str) else ""


@dataclass
class Redirect:
    fd: int  # 1 stdout, 2 stderr
    target: Word | None  # None with to_fd set means a duplication like 2>&1
    append: bool = False
    to_fd: int | None = None


@dataclass
class SimpleCommand:
    words: list[Word] = field(default_factory=list)
    redirects: list[Redirect] = field(default_factory=list)


@dataclass
class Pipeline:
    commands: list[SimpleCommand]
    run_if: str  # ";" always, "&&" after success, "||" after failure
    background: bool = False  # ended by '&'


_OPERATORS = ("&&", "||", "2>&1", ">&2", "&>", "2>>", ">>", "2>", "1>", ">", ";", "|", "&")


def _tokenize(line: str) -> list[Word | str]:  # noqa: C901 — a lexer: one loop, a branch per lexical case; split, the word being built becomes shared state
    """Split into words (``Word``) and operator strings."""
    tokens: list[Word | str] = []
    current: Word | None = None
    literal: list[str] = []

    def flush_literal() -> None:
        nonlocal current
        if literal:
            current = current or Word()
            current.parts.append("".join(literal))
            literal.clear()

    def end_word() -> None:
        nonlocal current
        flush_literal()
        if current is not None:
            tokens.append(current)
            current = None

    index = 0
    while index < len(line):
        char = line[index]
        if char in " \t":
            end_word()
            index += 1
        elif char == "\n":
            end_word()
            tokens.append("\n")
            index += 1
        elif char == "#" and current is None and not literal:
            newline = line.find("\n", index)
            index = len(line) if newline < 0 else newline
        elif char == "'":
            closing = line.find("'", index + 1)
            if closing < 0:
                raise ShellSyntaxError("unterminated single quote")
            current = current or Word()
            literal.append(line[index + 1 : closing])
            index = closing + 1
        elif char == '"':
            current = current or Word()
            index = _read_double_quoted(line, index + 1, current, literal)
        elif char == "\\":
            if index + 1 < len(line):
                literal.append(line[index + 1])
            current = current or Word()
            index += 2
        elif (match := _PARAMETER.match(line, index)) is not None:
            flush_literal()
            current = current or Word()
            current.parts.append(Parameter(next(group for group in match.groups() if group)))
            index = match.end()
        else:
            operator = next((op for op in _OPERATORS if line.startswith(op, index)), None)
            # "2>" and "1>" are operators only at the start of a word, as in sh.
            if operator and operator[0] in "12" and (current is not None or literal):
                operator = None
            if operator is None:
                literal.append(char)
                index += 1
            else:
                end_word()
                tokens.append(operator)
                index += len(operator)
    end_word()
    return tokens


def _read_double_quoted(line: str, index: int, word: Word, literal: list[str]) -> int:
    while index < len(line):
        char = line[index]
        if char == '"':
            return index + 1
        if (match := _PARAMETER.match(line, index)) is not None:
            if literal:
                word.parts.append("".join(literal))
                literal.clear()
            word.parts.append(Parameter(next(group for group in match.groups() if group)))
            index = match.end()
            continue
        if char == "\\" and index + 1 < len(line) and line[index + 1] in '"\\$`':
            literal.append(line[index + 1])
            index += 2
        else:
            literal.append(char)
            index += 1
    raise ShellSyntaxError("unterminated double quote")


def parse(line: str) -> list[Pipeline]:
    """Parse a command line into pipelines joined by ``;``/``&&``/``||``."""
    pipelines: list[Pipeline] = []
    commands: list[SimpleCommand] = [SimpleCommand()]
    run_if = ";"
    tokens = _tokenize(line)
    index = 0
    while index < len(tokens):
        token = tokens[index]
        index += 1
        if isinstance(token, Word):
            commands[-1].words.append(token)
        elif token == "|":
            if not commands[-1].words:
                raise ShellSyntaxError("syntax error: '|' unexpected")
            commands.append(SimpleCommand())
        elif token == "\n" and not commands[-1].words and not commands[-1].redirects:
            continue  # a blank line, or a line that ends in '&&', '||' or '|' and goes on below
        elif token in (";", "&&", "||", "&", "\n"):
            if not commands[-1].words:
                if token in (";", "&") and len(commands) == 1:
                    continue  # empty statement, e.g. a trailing ';'
                raise ShellSyntaxError(f"syntax error: '{token}' unexpected")
            pipelines.append(Pipeline(commands, run_if, background=token == "&"))
            commands, run_if = [SimpleCommand()], (token if token in ("&&", "||") else ";")
        else:
            index = _redirect(commands[-1], token, tokens, index)
    _end_line(pipelines, commands, run_if)
    return pipelines


def _redirect(command: SimpleCommand, token: str, tokens: list[Word | str], index: int) -> int:
    """Add the redirection ``token`` (its file name at ``tokens[index]``) to ``command``; returns
    the index of the token after it."""
    if token in ("2>&1", ">&2"):
        fd, to_fd = (2, 1) if token == "2>&1" else (1, 2)
        command.redirects.append(Redirect(fd, None, to_fd=to_fd))
        return index
    target = tokens[index] if index < len(tokens) else None
    if not isinstance(target, Word):
        raise ShellSyntaxError(f"syntax error: '{token}' needs a file name")
    if token == "&>":
        command.redirects.append(Redirect(1, target))
        command.redirects.append(Redirect(2, None, to_fd=1))
    else:
        fd = 2 if token.startswith("2") else 1
        command.redirects.append(Redirect(fd, target, append=token.endswith(">>")))
    return index + 1


def _end_line(pipelines: list[Pipeline], commands: list[SimpleCommand], run_if: str) -> None:
    """Close the line: keep its last pipeline, or reject a line that stops mid-construct."""
    if commands[-1].words or commands[-1].redirects:
        if not commands[-1].words:
            raise ShellSyntaxError("syntax error: redirection without a command")
        pipelines.append(Pipeline(commands, run_if))
    elif len(commands) > 1:
        raise ShellSyntaxError("syntax error: pipe without a command after it")
    elif run_if in ("&&", "||"):
        raise ShellSyntaxError(f"syntax error: '{run_if}' at the end of the line")
