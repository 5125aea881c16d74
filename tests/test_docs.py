"""README.md, BENCHMARKS.md and docs/*.md stay true to the repository, without starting anything:

* every relative link resolves to a file, and every ``#anchor`` to a heading of its target (GitHub's
  slugs);
* every command they show (``oncelog ...``, ``python -m ...``, in shell blocks and in inline code)
  names a command that exists: the ``oncelog`` subcommand (and verb) in ``oncelog.cli``'s argparse
  parser, i.e. ``oncelog <sub> --help`` would answer; the ``python -m`` module on the path; the
  ``python -m bench`` subcommand in ``bench/__main__.py``; a ``pytest`` path in the tree;
* every repository path shown in inline code (``tests/...``, ``oncelog/...``) exists;
* none speaks of the project's own issue numbers (Kafka's JIRA ids and KIPs, and other projects'
  ``owner/repo#N``, are fine).
"""

from __future__ import annotations

import argparse
import glob
import importlib.util
import os
import re
import unicodedata

import pytest

from oncelog.cli import build_parser

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = sorted(["README.md", "BENCHMARKS.md"] + [os.path.relpath(p, REPO) for p in
                                                glob.glob(os.path.join(REPO, "docs", "*.md"))])
SHELL = {"bash", "sh", "shell", "console"}
PATH_ROOTS = ("oncelog/", "tests/", "bench/", "docs/", "pyspark_oncelog/", ".ci/")


def read(rel: str) -> str:
    with open(os.path.join(REPO, rel), encoding="utf-8") as f:
        return f.read()


def split_blocks(text: str) -> tuple[list[str], list[tuple[str, list[str]]]]:
    """(prose lines, [(language, lines) of each fenced block])."""
    prose, blocks, lang, block = [], [], None, []
    for line in text.splitlines():
        if line.startswith("```"):
            if lang is None:
                lang, block = line[3:].strip().lower(), []
            else:
                blocks.append((lang, block))
                lang = None
            continue
        (block if lang is not None else prose).append(line)
    assert lang is None, "a fenced block is not closed"
    return prose, blocks


def inline_code(prose: list[str]) -> list[str]:
    return re.findall(r"``?([^`]+?)``?", "\n".join(prose))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, only letters, digits, '_', '-' and spaces, spaces as '-'."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    return "".join(c for c in text if unicodedata.category(c)[0] in "LMN" or c in "_- ").replace(" ", "-")


def anchors(rel: str) -> set[str]:
    prose, _ = split_blocks(read(rel))
    out, seen = set(), {}
    for line in prose:
        m = re.match(r"#{1,6} (.*)", line)
        if m:
            base = slug(m.group(1))
            n = seen.get(base, 0)
            seen[base] = n + 1
            out.add(base if n == 0 else f"{base}-{n}")
        out.update(re.findall(r"<a (?:id|name)=\"([^\"]+)\"", line))
    return out


def links(rel: str) -> list[str]:
    prose, _ = split_blocks(read(rel))
    text = re.sub(r"`[^`]*`", "", "\n".join(prose))
    return re.findall(r"\[[^\]]*\]\(([^)\s]+)\)", text)


@pytest.mark.parametrize("rel", DOCS)
def test_links_and_anchors_resolve(rel):
    bad = []
    for target in links(rel):
        if re.match(r"[a-z]+:", target):
            continue  # http(s), mailto: not checked offline
        path, _, anchor = target.partition("#")
        dest = os.path.normpath(os.path.join(os.path.dirname(rel), path)) if path else rel
        if not os.path.exists(os.path.join(REPO, dest)):
            bad.append(f"{target}: no file {dest}")
        elif anchor and anchor not in anchors(dest):
            bad.append(f"{target}: no heading #{anchor} in {dest}")
    assert not bad, f"{rel}: " + "; ".join(bad)


def shown_commands(rel: str) -> list[list[str]]:
    """Token lists of every command segment in shell blocks and inline code."""
    prose, blocks = split_blocks(read(rel))
    snippets = inline_code(prose)
    for lang, lines in blocks:
        if lang in SHELL:
            joined = "\n".join(lines).replace("\\\n", " ")
            snippets += [line.split(" #", 1)[0] for line in joined.splitlines() if not line.lstrip().startswith("#")]
    out = []
    for snippet in snippets:
        for segment in re.split(r"\|\|?|;|&&|\$\(|\)", snippet):
            tokens = segment.split()
            if tokens:
                out.append(tokens)
    return out


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _first_positional(parser: argparse.ArgumentParser, tokens: list[str]) -> str | None:
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if not tok.startswith("-"):
            return tok
        action = parser._option_string_actions.get(tok.split("=", 1)[0])
        i += 1 if action is None or action.nargs == 0 or "=" in tok else 2
    return None


def check_oncelog(args: list[str]) -> str | None:
    """None if `oncelog ARGS` names an existing subcommand (and verb), else what is wrong."""
    parser = build_parser()
    sub = _first_positional(parser, args)
    if sub is None or sub.startswith(("<", "[", "$", "...")):
        return None  # `oncelog` alone, or a placeholder
    commands = _subparsers(parser)
    if sub not in commands:
        return f"no subcommand {sub!r} (oncelog has {sorted(commands)})"
    verbs = _subparsers(commands[sub])
    if verbs:
        verb = _first_positional(commands[sub], args[args.index(sub) + 1:])
        if verb is not None and not verb.startswith(("<", "[", "$")) and verb not in verbs:
            return f"no verb {verb!r} for oncelog {sub} (it has {sorted(verbs)})"
    return None


def bench_subcommands() -> set[str]:
    return set(re.findall(r'sys\.argv\[1\] == "([\w-]+)"', read("bench/__main__.py")))


def check_python_m(module: str, args: list[str]) -> str | None:
    if importlib.util.find_spec(module) is None:
        return f"no module {module}"
    if module == "oncelog":
        return check_oncelog(args)
    if module == "bench" and args and not args[0].startswith("-") and args[0] not in bench_subcommands():
        return f"no bench subcommand {args[0]!r} (bench/__main__.py has {sorted(bench_subcommands())})"
    if module == "pytest":
        return check_pytest(args)
    return None


def check_pytest(args: list[str]) -> str | None:
    for arg in args:
        if arg.startswith("tests") and not os.path.exists(os.path.join(REPO, arg.split("::")[0])):
            return f"no test path {arg}"
    return None


def check(tokens: list[str]) -> str | None:
    for i, tok in enumerate(tokens):
        name = tok.rsplit("/", 1)[-1]
        if name == "oncelog" and (i == 0 or tokens[i - 1] in ("sudo", "exec") or "=" in tokens[i - 1]):
            return check_oncelog(tokens[i + 1:])
        if name in ("python", "python3") and tokens[i + 1:i + 2] == ["-m"] and len(tokens) > i + 2:
            return check_python_m(tokens[i + 2], tokens[i + 3:])
        if name == "pytest" and i == 0:
            return check_pytest(tokens[1:])
        if "=" not in tok:
            return None  # another program: not ours to check
    return None


@pytest.mark.parametrize("rel", DOCS)
def test_every_shown_command_exists(rel):
    bad = [f"`{' '.join(tokens)}`: {why}" for tokens in shown_commands(rel) if (why := check(tokens))]
    assert not bad, f"{rel}: " + "; ".join(bad)


def test_the_command_checker_catches_a_wrong_command():
    assert check("oncelog serve --data-dir d".split()) is None
    assert check(".venv/bin/oncelog topics list".split()) is None
    assert check("oncelog transactions list | describe x".split()) is None
    assert check("oncelog --log-level debug groups --bootstrap-server b:1 describe g".split()) is None
    assert "no subcommand" in check("oncelog serv".split())
    assert "no verb" in check("oncelog topics lst".split())
    assert check(".venv/bin/python -m bench restart".split()) is None
    assert "no bench subcommand" in check("python -m bench restrat".split())
    assert "no module" in check("python -m tests.no_such_module".split())
    assert "no test path" in check("pytest tests/no_such_dir".split())


@pytest.mark.parametrize("rel", DOCS)
def test_every_repository_path_shown_exists(rel):
    prose, _ = split_blocks(read(rel))
    bad = []
    for code in inline_code(prose):
        path = code.split("::")[0].rstrip(".,:;")
        if (path.startswith(PATH_ROOTS) and " " not in path and not re.search(r"[<>{}*$]", path)
                and not os.path.exists(os.path.join(REPO, path))):
            bad.append(path)
    assert not bad, f"{rel} names paths that do not exist: {bad}"


OWN_ISSUE = re.compile(r"\bissues? ?#?\d+|(?<![\w/.#-])#\d+\b", re.I)


def _issue_mentions(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if OWN_ISSUE.search(line)]


@pytest.mark.parametrize("rel", sorted(set(DOCS) | {os.path.relpath(p, REPO) for p in glob.glob(
    os.path.join(REPO, "**", "*.md"), recursive=True) if "/.venv/" not in p and "/build/" not in p
    and "/node_modules/" not in p and ".egg-info" not in p}))
def test_no_issue_numbers(rel):
    found = _issue_mentions(read(rel))
    assert not found, f"{rel} speaks of issue numbers: {found[:5]}"


def test_the_issue_pattern():
    assert _issue_mentions("fixed in issue 12, see #34")
    assert not _issue_mentions("KAFKA-17754, KIP-848, confluentinc/librdkafka#4989, ## Heading, a # comment")
