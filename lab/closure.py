"""
d1's import closure: the eight top files and every repository module they import, transitively.

Static (ast): `import a.b` reads a/__init__.py then a/b.py; `from x import y` reads x, and x/y.py
where y is a module. Imports anywhere in a file count; relative imports are not used here.
Printed: each file with its lines, totals by folder and overall, and the eight files' lines and wide
lines (> 95 characters). --check exits 1 if the closure holds a module of methods/ or lab/.

Run:  python -m lab.closure [--check] [--root DIR]   (DIR: another checkout, an older worktree say)
"""
import argparse
import ast
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
EIGHT = ("model", "sample", "logprob", "sft", "grpo", "rewards", "tasks", "eval")  # reading order
OUTSIDE = ("methods", "lab")
WIDE = 95


def module_path(root, name):
    """The file of repository module `name` (dotted) under `root`, or None if it is not one of ours."""
    parts = name.split(".")
    for path in (root.joinpath(*parts).with_suffix(".py"), root.joinpath(*parts, "__init__.py")):
        if path.is_file():
            return path
    return None


def imported_names(path):
    """Every dotted name `path` may import, parents included (`from x import y`: x and x.y)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        for module in modules:
            parts = module.split(".")
            names |= {".".join(parts[:i]) for i in range(1, len(parts) + 1)}
    return names


def closure(root=REPO, start=EIGHT):
    """{module name: path} for `start` and every repository module they import, transitively."""
    root = Path(root)
    found = {}
    todo = list(start)
    while todo:
        name = todo.pop()
        path = module_path(root, name)
        if name not in found and path is not None:
            found[name] = path
            todo.extend(sorted(imported_names(path) - set(found)))
    return found


def outside_modules(modules):
    """The closure's modules that belong to the field or the lab."""
    return sorted(m for m in modules if m.split(".")[0] in OUTSIDE)


def report(root=REPO):
    """The closure's printout, as lines of text, and the modules of methods/ or lab/ it holds."""
    root = Path(root)
    mods = closure(root)
    rows = []
    for path in mods.values():
        rel = path.relative_to(root)
        folder = rel.parts[0] + "/" if len(rel.parts) > 1 else "(top)"
        rows.append((folder != "(top)", folder, str(rel), len(path.read_text().splitlines())))
    rows.sort()
    out = [f"d1's import closure under {root}: the eight files and every repository module they import"]
    out += [f"  {n:6,d}  {rel}" for _, _, rel, n in rows]
    files = Counter(folder for _, folder, _, _ in rows)
    lines = {folder: sum(n for _, f, _, n in rows if f == folder) for folder in files}
    out.append("by folder:")
    out += [f"  {folder:10s} {files[folder]:3d} files  {lines[folder]:7,d} lines" for folder in files]
    out.append(f"total: {len(rows)} files, {sum(lines.values()):,} lines")
    out.append(f"the eight files (lines, lines wider than {WIDE} characters):")
    eight = [(root / f"{name}.py").read_text().splitlines() for name in EIGHT]
    for name, text in zip(EIGHT, eight):
        out.append(f"  {len(text):6,d}  {sum(len(line) > WIDE for line in text):4d}  {name}.py")
    wide = sum(len(line) > WIDE for text in eight for line in text)
    out.append(f"  {sum(map(len, eight)):6,d}  {wide:4d}  the eight together")
    bad = outside_modules(mods)
    if bad:
        out.append(f"the closure imports the field or the lab: {', '.join(bad)}")
    return out, bad


def main(argv=None):
    p = argparse.ArgumentParser(description="d1's import closure: files and lines")
    p.add_argument("--root", default=str(REPO), help="the checkout to measure (default: this one)")
    p.add_argument("--check", action="store_true", help="exit 1 if the closure imports methods/ or lab/")
    args = p.parse_args(argv)
    lines, bad = report(Path(args.root).resolve())
    print("\n".join(lines))
    if args.check and bad:
        sys.exit(1)


if __name__ == "__main__":
    main()
