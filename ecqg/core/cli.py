"""The argument parser of every ``python -m ecqg...`` entry point, its ``--help`` led by the module's docstring.

Why: a description cut from a docstring's first line ends mid-sentence (the docstrings are wrapped at 120 columns),
and an entry point without a parser does its work, a whole stage, when asked for ``--help``. :func:`parser` takes
whole paragraphs of the docstring; ``tests/test_cli.py`` runs ``--help`` of every module that has a ``__main__``.
"""

from __future__ import annotations

import argparse
import inspect


def description(doc: str | None, paragraphs: int = 1) -> str:
    """The first ``paragraphs`` paragraphs of a docstring (blank-line separated), reST's double backquotes made
    single; argparse rewraps the text to the terminal."""
    parts = [part for part in inspect.cleandoc(doc or "").split("\n\n") if part.strip()]
    return "\n\n".join(parts[:paragraphs]).replace("``", "`")


class ParagraphsFormatter(argparse.HelpFormatter):
    """argparse's formatter, rewrapping each paragraph of the description on its own (argparse's own joins them)."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return "\n\n".join(super(ParagraphsFormatter, self)._fill_text(part, width, indent)
                             for part in text.split("\n\n"))


def parser(module: str, doc: str | None, paragraphs: int = 1, **kwargs) -> argparse.ArgumentParser:
    """An ArgumentParser named ``python -m <module>``, described by the first ``paragraphs`` of ``doc``."""
    kwargs.setdefault("formatter_class", ParagraphsFormatter)
    return argparse.ArgumentParser(prog=f"python -m {module}", description=description(doc, paragraphs), **kwargs)
