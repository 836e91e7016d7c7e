"""How a task folder is laid out in a sandbox's working directory, so that relative paths resolve as
they do in the folder while nothing of the user's can be written (`_Layout` says how), and what only the
evaluator may read is never put there (`hidden`)."""

import os
import shutil
import stat
from collections import deque
from collections.abc import Sequence
from pathlib import Path

COPY_UP_TO = 1_000_000  # bytes: a smaller file of the folder is copied, a larger one linked
COPY_BUDGET = 32_000_000  # bytes copied per experiment at most; past them, small files are linked too
MIRROR_UP_TO = 5_000  # entries laid out one by one; a directory that would pass them is linked whole


class _Layout:
    """Places the user's entries in the working directory without ever exposing them to a write.

    Directories are real directories here, so what the script creates in one stays in the working
    directory. A file is copied (the script may overwrite its copy; Python imports a copied script's
    neighbours from here, not from the folder) or, when large or past the copy budget, symlinked:
    Landlock refuses a write through the link, and the script may still remove or rename over it, which
    changes only the link. Never a hard link: that is the user's inode beneath the writable directory,
    and `open(name, "w")` would truncate the user's file. Without Landlock (`links` false) nothing would
    refuse a write through a symlink either, so everything is copied there, however large.
    """

    def __init__(self, links: bool, hidden: frozenset[str] = frozenset()) -> None:
        self.links = links
        self.hidden = hidden  # real paths left out: the evaluator's reads (Landlock refuses them too)
        self.copied = 0
        self.entries = 0

    def _hidden(self, path: str | Path) -> bool:
        return bool(self.hidden) and os.path.realpath(path) in self.hidden

    def whole(self, source: Path, at: Path) -> None:
        """`source` at `at` in one piece: a link (read-only), or where there can be none a copy."""
        if self._hidden(source):
            return
        if self.links:
            at.symlink_to(source)
        elif source.is_dir():
            self.mirror(source, at, set())
        elif source.is_file():
            self._file(str(source), at, source.stat())

    def mirror(self, source: Path, at: Path, keep: set[Path]) -> None:
        """`source`'s tree as real directories under `at`, breadth first. `keep`, relative to `source`:
        the directories laid out one by one whatever their size (the way to an edited file), and the
        edited files, left out (the run's version is written in their place)."""
        queue = deque([(source, at, Path(), os.path.realpath(source))])
        seen: set[str] = set()
        while queue:
            here, there, relative, real = queue.popleft()
            if real in seen:
                continue  # a link back up the tree: laid out already
            seen.add(real)
            entries = sorted(_entries(here), key=lambda entry: entry.name)
            if self.links and relative not in keep and self.entries + len(entries) > MIRROR_UP_TO:
                there.symlink_to(here)  # too many entries to lay out at each experiment: read-only
                continue
            there.mkdir(exist_ok=True)
            self.entries += len(entries)
            for entry in entries:
                name, target = relative / entry.name, there / entry.name
                if self._hidden(entry.path):
                    continue
                if entry.is_dir():
                    if entry.is_symlink() and self.links and name not in keep:
                        target.symlink_to(entry.path)  # the user's link: it may lead out of the folder
                    else:
                        inner = os.path.realpath(entry.path) if entry.is_symlink() else f"{real}/{entry.name}"
                        queue.append((Path(entry.path), target, name, inner))
                elif name in keep:
                    continue
                elif entry.is_file() and entry.is_symlink() and self.links:
                    # Linked, never copied: its target may be outside the folder and the declared reads,
                    # where Landlock refuses the script a read that a copy would give it.
                    target.symlink_to(entry.path)
                elif entry.is_file():
                    self._file(entry.path, target, entry.stat())
                elif self.links:
                    target.symlink_to(entry.path)  # a dangling link, a fifo: nothing to copy

    def read(self, work: Path, cwd: Path, position: Path, real: Path) -> None:
        """A declared read at `position` from the script's directory, where it is from the folder."""
        location = Path(os.path.normpath(cwd / position))
        if cwd.is_relative_to(location):  # it holds the folder: its other entries, level by level
            for part in cwd.relative_to(location).parts:
                for entry in _entries(real):
                    if entry.name != part and not os.path.lexists(location / entry.name):
                        self.whole(Path(entry.path), location / entry.name)
                location, real = location / part, real / part
            return
        above = [p for p in location.parents if p.is_relative_to(work) and p != work]
        if os.path.lexists(location) or any(p.is_symlink() or p.is_file() for p in above):
            return  # inside a read laid out already
        location.parent.mkdir(parents=True, exist_ok=True)
        self.whole(real, location)

    def _file(self, source: str, at: Path, info: os.stat_result) -> None:
        if self.links and (info.st_size > COPY_UP_TO or self.copied + info.st_size > COPY_BUDGET):
            at.symlink_to(source)
            return
        try:
            shutil.copyfile(source, at)
        except OSError:  # a file the server may not read (nor could the script): linked, or left out
            at.unlink(missing_ok=True)
            if self.links:
                at.symlink_to(source)
            return
        # The owner's mode bits, so an executable stays one; and writable: the copy is the script's.
        os.chmod(at, stat.S_IMODE(info.st_mode) | stat.S_IWUSR)
        self.copied += info.st_size


def _entries(directory: Path) -> list[os.DirEntry[str]]:
    """A directory's entries; none where it cannot be listed (nor could the script list it)."""
    try:
        with os.scandir(directory) as entries:
            return list(entries)
    except OSError:
        return []


def lay_out(
    folder: Path,
    work: Path,
    files: dict[str, str],
    reads: list[list[str]],
    *,
    links: bool,
    hidden: Sequence[str] = (),
) -> Path:
    """The folder laid out in `work` with the run's version of the edited files, and the declared
    `reads` ([as declared, resolved]) beside it as they are beside the folder; returns the directory
    the command runs in. A read that reaches above the folder (`../data`) puts that directory as many
    levels below `work` as it has `..`, named as the folder's own ancestors, so every relative path the
    script uses resolves to the place it has in the folder, and every write stays under `work`. What is
    `hidden` (real paths) is left out, wherever it is."""
    positions = []
    for declared, real in reads:
        position = Path(os.path.relpath(os.path.normpath(os.path.join(folder, declared)), folder))
        if position.parts[:1] == ("..",):
            positions.append((position, Path(real)))
    ups = max((position.parts.count("..") for position, _ in positions), default=0)
    names = folder.parts[1:]
    cwd = work.joinpath(*names[max(len(names) - ups - 1, 0) :]) if ups else work
    cwd.parent.mkdir(parents=True, exist_ok=True)
    keep = {Path()}
    for name in files:
        keep |= {Path(name), *Path(name).parents}
    layout = _Layout(links, frozenset(os.path.realpath(path) for path in hidden))
    layout.mirror(folder, cwd, keep)
    for name, text in files.items():
        (cwd / name).write_text(text, encoding="utf-8")
    for position, real in sorted(positions, key=lambda item: len(item[0].parts)):
        layout.read(work, cwd, position, real)
    return cwd
