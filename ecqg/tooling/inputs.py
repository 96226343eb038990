"""The paper profile's input files by one command: ``python -m ecqg.tooling.inputs fetch`` (``make inputs``) downloads
DPR's published files by their resource names (DPR's ``download_data.py``) into DPR's own layout and names under
``downloads/``, resumes a cut download, decompresses, and checks every file against ``downloads/SHA256SUMS``.

Sources, in this order for each file: an already-downloaded DPR tree (``--dpr-tree DIR``, the ``downloads`` folder
DPR's script made: its files are linked, not copied), a mirror (``--mirror URL-or-folder``: the same relative paths as
DPR's host, e.g. a team's copy or a USB disk), else DPR's host. A download goes to ``<file>.part`` (resumed with an
HTTP range request where the server allows it), is decompressed into a temporary name and renamed into place, so a
cut run leaves no file that looks complete.

Checksums: DPR publishes none, and the ones of these files are not known to this repository. The first complete copy
of each file is recorded in ``downloads/SHA256SUMS`` with its size; every later ``fetch`` (and ``verify``) checks the
files against it and names any that changed. Commit or share that file with the team so every node checks against the
same copies (``--sums FILE`` reads another one).
"""

from __future__ import annotations

import gzip
import hashlib
import os
import shutil
import sys
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ecqg.core import cli
from ecqg.core.io import write_text

DPR_HOST = "https://dl.fbaipublicfiles.com/dpr"
DOWNLOADS = Path("downloads")
SUMS = "SHA256SUMS"


@dataclass(frozen=True)
class Resource:
    """One of DPR's resources: its name in DPR's ``RESOURCES_MAP``, its path under DPR's host and whether that file
    is gzipped; it lands where DPR's script puts it: ``downloads/<name with dots as folders><ext>``."""

    name: str
    remote: str
    ext: str
    compressed: bool

    @property
    def path(self) -> Path:
        *folders, stem = self.name.split(".")
        return Path(*folders, stem + self.ext)


# The files params/paper.yaml reads (DPR: data.wikipedia_split.psgs_w100 -> downloads/data/wikipedia_split/
# psgs_w100.tsv, data.retriever.qas.webq-test -> downloads/data/retriever/qas/webq-test.csv, ...).
PAPER = (
    Resource("data.wikipedia_split.psgs_w100", "wikipedia_split/psgs_w100.tsv.gz", ".tsv", True),
    Resource("data.retriever.nq-train", "data/retriever/biencoder-nq-train.json.gz", ".json", True),
    Resource("data.retriever.qas.nq-dev", "data/retriever/nq-dev.qa.csv", ".csv", False),
    Resource("data.retriever.qas.nq-test", "data/retriever/nq-test.qa.csv", ".csv", False),
    Resource("data.retriever.qas.trivia-test", "data/retriever/trivia-test.qa.csv.gz", ".csv", True),
    Resource("data.retriever.qas.webq-test", "data/retriever/webquestions-test.qa.csv", ".csv", False),
)


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read_sums(path: Path) -> dict[str, tuple[str, int]]:
    """``relative path -> (sha256, bytes)`` from a sums file (``<sha256>  <bytes>  <path>`` per line)."""
    if not path.is_file():
        return {}
    out = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.split(None, 2)
        if len(parts) != 3 or not parts[1].isdigit():
            raise ValueError(f"{path}, line {number}: expected '<sha256>  <bytes>  <path>', got {line!r}")
        out[parts[2]] = (parts[0], int(parts[1]))
    return out


def write_sums(path: Path, sums: dict[str, tuple[str, int]]) -> None:
    write_text(path, "# sha256, bytes and path of each input as first fetched (python -m ecqg.tooling.inputs)\n"
               + "".join(f"{digest}  {size}  {name}\n" for name, (digest, size) in sorted(sums.items())))


def _download(url: str, part: Path) -> None:
    """``url`` into ``part``, resuming from its current length where the server honours a range request."""
    part.parent.mkdir(parents=True, exist_ok=True)
    have = part.stat().st_size if part.exists() else 0
    request = urllib.request.Request(url, headers={"Range": f"bytes={have}-"} if have else {})
    try:
        response = urllib.request.urlopen(request, timeout=60)
    except urllib.error.HTTPError as exc:
        if exc.code == 416 and have:          # the range starts at the end: already complete
            return
        raise RuntimeError(f"{url}: HTTP {exc.code} {exc.reason}") from None
    except urllib.error.URLError as exc:
        raise RuntimeError(f"{url}: cannot connect ({exc.reason}); give --mirror or --dpr-tree on a node without "
                           "internet") from None
    with response:
        resumed = have and response.status == 206
        with open(part, "ab" if resumed else "wb") as out:
            shutil.copyfileobj(response, out, 1 << 20)


def _source(resource: Resource, mirror: str | None) -> str:
    if mirror is None:
        return f"{DPR_HOST}/{resource.remote}"
    if "://" in mirror:
        return f"{mirror.rstrip('/')}/{resource.remote}"
    return Path(mirror, resource.remote).resolve().as_uri()


def fetch_one(resource: Resource, out: Path, mirror: str | None, dpr_tree: Path | None) -> str:
    """Put one resource in place; returns how (``present``, ``linked``, ``downloaded``)."""
    target = out / resource.path
    if target.is_file():
        return "present"
    target.parent.mkdir(parents=True, exist_ok=True)
    if dpr_tree is not None and (dpr_tree / resource.path).is_file():
        os.symlink((dpr_tree / resource.path).resolve(), target)
        return "linked"
    part = target.with_name(target.name + (".gz" if resource.compressed else "") + ".part")
    _download(_source(resource, mirror), part)
    tmp = target.with_name(f".{target.name}.tmp")
    if resource.compressed:
        with gzip.open(part, "rb") as source, open(tmp, "wb") as sink:
            try:
                shutil.copyfileobj(source, sink, 1 << 20)
            except (OSError, EOFError) as exc:
                tmp.unlink(missing_ok=True)
                raise RuntimeError(f"{part}: not a complete gzip file ({exc}); delete it to download again") from None
        os.replace(tmp, target)
        part.unlink()
    else:
        os.replace(part, target)
    return "downloaded"


def verify(out: Path, resources: Sequence[Resource], sums_file: Path) -> list[str]:
    """Check every present file against the sums (recording the ones not yet there); the problems, each naming
    its file."""
    sums = read_sums(sums_file)
    problems, changed = [], False
    for resource in resources:
        target = out / resource.path
        name = resource.path.as_posix()
        if not target.is_file():
            problems.append(f"{target}: missing (resource {resource.name})")
            continue
        digest, size = sha256(target), target.stat().st_size
        if name not in sums:
            sums[name] = (digest, size)
            changed = True
        elif sums[name] != (digest, size):
            problems.append(f"{target}: sha256 {digest[:12]}..., {size:,} bytes, but {sums_file} records "
                            f"{sums[name][0][:12]}..., {sums[name][1]:,} bytes")
    if changed:
        write_sums(sums_file, sums)
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    parser = cli.parser("ecqg.tooling.inputs", __doc__, paragraphs=3)
    parser.add_argument("command", choices=("fetch", "verify", "list"))
    parser.add_argument("--out", type=Path, default=DOWNLOADS, help="where DPR's layout goes (default %(default)s)")
    parser.add_argument("--mirror", help="a URL or folder with DPR's host's relative paths")
    parser.add_argument("--dpr-tree", type=Path, help="an already-downloaded DPR downloads/ folder (linked)")
    parser.add_argument("--sums", type=Path, help=f"the checksums file (default <out>/{SUMS})")
    args = parser.parse_args(argv)
    sums_file = args.sums or args.out / SUMS
    if args.command == "list":
        for r in PAPER:
            print(f"{r.name:34} {args.out / r.path}  <- {DPR_HOST}/{r.remote}")
        return 0
    if args.command == "fetch":
        for r in PAPER:
            try:
                how = fetch_one(r, args.out, args.mirror, args.dpr_tree)
            except RuntimeError as exc:
                print(f"error: {r.name}: {exc}", file=sys.stderr)
                return 1
            print(f"{how:10} {args.out / r.path}")
    problems = verify(args.out, PAPER, sums_file)
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    if not problems:
        print(f"every input matches {sums_file}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
