"""The repository's shape, as the README and docs/files.md describe it: the design card's eight files at
the top; at most six folders beside docs/ and tests/; the folders below the eight import none of them
(but model.py, and one named exception), methods/ builds on sample.py and logprob.py only, nothing
imports lab/; every import at the top of its file and no import cycle; no file too long or the eight
too wide to read; every citation resolving inside the repository.

Run: python -m pytest tests/test_layout.py -q
"""
import ast
import io
import re
import tokenize

from conftest import REPO

READING_PATH = {"model", "sample", "logprob", "sft", "grpo", "rewards", "tasks", "eval"}
BELOW = ("modelio", "sandbox", "taskdata", "ops")  # what the eight call into
BESIDE = ("methods",)  # the field's methods: plug in through grpo.py's registry
ABOVE = ("lab",)  # runs the eight for real
FOLDERS = BELOW + BESIDE + ABOVE
GROUND = {"model"}  # the network: every layer runs it
# the one import from a folder below up into the eight files: d1's eval parsers reuse its training rewards
EXCEPTIONS = {("taskdata.parsers", "rewards")}
METHODS_BUILD_ON = {"model", "sample", "logprob"}
MAX_LINES = 450  # any .py outside tests/
MAX_WIDTH = 100  # the eight files, as wide as nanoGPT's
# file names that comments cite from other projects' code (d1's, LLaDA's, Dream's) or the standard
# library, and a usage example's placeholders: not files of this repository
EXTERNAL = {"train.py", "reward_func.py", "generation_utils.py", "get_log_likelihood.py", "modeling_dream.py",
            "configuration_dream.py", "modeling_llada.py", "configuration_llada.py", "tokenization_dream.py",
            "signal.py", "script.py", "x.py"}


def project_files():
    """{module name: path} for every .py of the project outside tests/."""
    files = {p.stem: p for p in REPO.glob("*.py")}
    for folder in FOLDERS:
        files.update({f"{folder}.{p.stem}": p for p in (REPO / folder).glob("*.py") if p.stem != "__init__"})
    return files


def imports_of(path, modules, inner_only=False):
    """The project modules that `path` imports anywhere in the file (top level, functions, __main__), or
    with inner_only those imported anywhere but at the top level."""
    tree = ast.parse(path.read_text())
    nodes = ast.walk(tree)
    if inner_only:  # the bodies of functions and of the __main__ block
        scopes = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) or
                  (isinstance(n, ast.If) and "__main__" in ast.unparse(n.test))]
        nodes = [n for scope in scopes for n in ast.walk(scope)]
    found = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            # `from taskdata import parsers` and `from taskdata.parsers import x` import taskdata.parsers
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        else:
            continue
        found |= {n for n in names if n in modules or n.split(".")[0] in FOLDERS}
    return found


def graph():
    files = project_files()
    return files, {m: imports_of(p, files) - {m} for m, p in files.items()}


def test_top_level_is_the_reading_path_and_six_folders():
    assert {p.stem for p in REPO.glob("*.py")} == READING_PATH
    folders = {p.name for p in REPO.iterdir() if p.is_dir() and not p.name.startswith(".")} - \
        {"docs", "tests", "out", "__pycache__"}
    assert folders == set(FOLDERS) and len(FOLDERS) <= 6, folders
    for folder in FOLDERS:
        assert (REPO / folder / "__init__.py").exists(), f"{folder}/ must be a package (python -m {folder}.x)"
    assert "MIT License" in (REPO / "LICENSE").read_text()


def test_no_import_cycles():
    _, g = graph()
    # depth-first search; a back edge is a cycle, reported as the path that closes it
    state, stack = {}, []

    def visit(m):
        state[m] = "open"
        stack.append(m)
        for n in sorted(g[m]):
            if n not in g:
                continue
            if state.get(n) == "open":
                raise AssertionError("import cycle: " + " -> ".join(stack[stack.index(n):] + [n]))
            if n not in state:
                visit(n)
        stack.pop()
        state[m] = "done"

    for m in sorted(g):
        if m not in state:
            visit(m)


def test_the_folders_stand_below_beside_and_above_the_eight_files():
    _, g = graph()
    for m, deps in g.items():
        folder = m.split(".")[0] if "." in m else None
        top = {d for d in deps if "." not in d and d in READING_PATH}
        lab = {d for d in deps if d.split(".")[0] in ABOVE}
        if folder in BELOW:
            up = {d for d in top - GROUND if (m, d) not in EXCEPTIONS}
            assert not up, f"{m} (below the eight files) imports {sorted(up)}"
            assert not {d for d in deps if d.split(".")[0] in BESIDE}, f"{m} imports methods/"
        if folder in BESIDE:
            assert top <= METHODS_BUILD_ON, f"{m} imports {sorted(top - METHODS_BUILD_ON)}"
        if folder not in ABOVE:
            assert not lab, f"{m} imports {sorted(lab)}: nothing imports lab/"


def test_every_import_sits_at_the_top():
    # an import inside a function (or a __main__ block) hides a dependency, and one made to dodge a cycle hides
    # a wrong layer; third-party and standard-library imports may be lazy (optional dependencies)
    files = project_files()
    inner = {m: imports_of(p, files, inner_only=True) for m, p in files.items()}
    assert not {m: sorted(v) for m, v in inner.items() if v}


def test_no_file_is_too_long_and_the_eight_are_narrow():
    long = {str(p.relative_to(REPO)): n for p in project_files().values()
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, f"over {MAX_LINES} lines: {long}"
    for name in READING_PATH:
        wide = [i for i, line in enumerate((REPO / f"{name}.py").read_text().splitlines(), 1) if len(line) > MAX_WIDTH]
        assert not wide, f"{name}.py: lines over {MAX_WIDTH} characters: {wide}"


def text_files():
    texts = [p for p in REPO.rglob("*") if p.suffix in (".py", ".md", ".sh") or p.name == "Makefile"]
    return [p for p in texts if not {".venv", "out", ".git"} & set(p.relative_to(REPO).parts)]


def test_citations_resolve_inside_the_repository():
    """No code, script or doc points outside the repository (../shared is the developers' reference
    shelf, not part of a clone), and every page of docs/ that is cited exists."""
    # the two forbidden strings are built, not written, so this file passes its own check
    outside = ("shared" + "/docs", "d1" + "-spec")
    for p in text_files():
        text = p.read_text()
        rel = p.relative_to(REPO)
        for bad in outside:
            assert bad not in text, f"{rel} cites {bad}, which is outside the repository"
        for doc in set(re.findall(r"docs/[\w.-]+\.md", text)):
            assert (REPO / doc).exists(), f"{rel} cites {doc}, which does not exist"


def test_cited_readme_sections_exist():
    headings = {line.lstrip("#").strip() for line in (REPO / "README.md").read_text().splitlines()
                if line.startswith("#")}
    for p in text_files():
        for section in re.findall("README" + r' "([^"]+)"', p.read_text()):  # built: not a citation itself
            section = " ".join(section.split())  # a citation may break across lines
            assert section in headings, f"{p.relative_to(REPO)} cites README \"{section}\", which has no such section"


def comments(path):
    """The comments and docstrings of a .py file, as text."""
    out = []
    for tok in tokenize.generate_tokens(io.StringIO(path.read_text()).readline):
        if tok.type == tokenize.COMMENT or (tok.type == tokenize.STRING and tok.string.startswith(('"""', "'''"))):
            out.append(tok.string)
    return "\n".join(out)


def test_a_bare_file_name_in_a_comment_names_one_file():
    names = {}
    for p in list(REPO.glob("*.py")) + [p for f in FOLDERS for p in (REPO / f).glob("*.py")]:
        names.setdefault(p.name, []).append(p)
    sources = list(project_files().values()) + list((REPO / "tests").glob("*.py"))
    for p in sources:
        # bare: not part of a path (no "/" or "." before it) and not a module path (lab.bench)
        for name in set(re.findall(r"(?<![\w/.-])([a-z_][a-z0-9_]*\.py)\b", comments(p))):
            if name in EXTERNAL or (REPO / "tests" / name).exists():
                continue
            assert len(names.get(name, [])) == 1, f"{p.relative_to(REPO)}: {name} names {len(names.get(name, []))} files"
