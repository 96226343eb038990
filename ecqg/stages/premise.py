"""The paper's premise measured on the current profile's gold-only DPR runs and its untrained base (issue 67):
``python -m ecqg.stages.premise`` writes ``results/premise/<base>.json`` (``naive`` for ``bundled:naive``, a
folder's name for a path) and rewrites ``results/premise/README.md`` from every base measured so far.

Run it after the profile's ``retrieve_dense@baseline-<seed>`` stages (``dvc repro retrieve_dense@baseline-2022``
...): it reads their models and NQ runs. What is measured, and why with the entity attention both summed and averaged
over word pieces: ``ecqg.pipeline.premise``. ``--page-only`` rewrites the page from the committed files alone.
"""

from __future__ import annotations

from pathlib import Path

from ecqg.core import cli, config, settings
from ecqg.core.io import write_json, write_text

FOLDER = Path("results") / "premise"


def base_slug(ref: str) -> str:
    """``bundled:naive`` -> ``naive``; a hub id or a path -> its last part."""
    return ref.rstrip("/").replace(":", "/").rsplit("/", 1)[-1]


def main(argv: list[str] | None = None) -> int:
    parser = cli.parser("ecqg.stages.premise", __doc__, paragraphs=2)
    parser.add_argument("--seeds", type=int, nargs="*", help="the runs to measure (default: dpr.seeds)")
    parser.add_argument("--page-only", action="store_true", help="only rewrite README.md from the JSON files")
    args = parser.parse_args(argv)
    from ecqg.core.logs import setup_logging
    from ecqg.report.premise_page import render_page

    setup_logging()
    if not args.page_only:
        from ecqg.core.device import host
        from ecqg.pipeline.premise import measure

        s = settings.of(config.load())
        result = measure(s, args.seeds)
        result["setting"]["host"] = host()
        write_json(FOLDER / f"{base_slug(s.dpr.base_model)}.json", result)
    write_text(FOLDER / "README.md", render_page(FOLDER))
    print(f"{FOLDER / 'README.md'} written")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
