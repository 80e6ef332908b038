"""
The rewriting half of the strict assert check (sandbox/strict_asserts.py has the idea and the check): before
a program runs, each covered assert of its tests becomes `yield (kind, op, *operands)`, so that the
runner (sandbox/runner.py) hands the operands to strict_asserts.check(). Done in the trainer's
process by sandbox/run.py, which sends the compiled result to the sandbox: parsing is not executing, and
the sandbox then need not import `ast` (a fifth of a sandbox's start-up).

    from sandbox.strict_rewrite import prepare
    code, functions, plans, covered = prepare(program, tests)   # SyntaxError: run it as written

Standard library only.
"""
import ast
import types

_type, _CodeType = type, types.CodeType
SINGLETONS = (None, True, False)  # the literals `is` / `is not` may compare with
UNSAFE = (ast.Compare, ast.BoolOp, ast.IfExp)  # inside an operand, the program's objects would decide these

def _safe(node):
    return not any(isinstance(n, UNSAFE) or (isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not))
                   for n in ast.walk(node))


def _is_singleton(node):
    return isinstance(node, ast.Constant) and any(node.value is s for s in SINGLETONS)


def _is_call_of(node, module, name):
    """node is a call of `module.name(...)` or of a bare `name(...)`."""
    f = node.func if isinstance(node, ast.Call) else None
    return (isinstance(f, ast.Attribute) and f.attr == name and isinstance(f.value, ast.Name) and f.value.id == module) \
        or (isinstance(f, ast.Name) and f.id == name)


def covered_form(test):
    """An assert's test expression -> (kind, op, [operand nodes], the isclose / approx call or None), or
    None when it is not a covered form."""
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        a, b, op = test.left, test.comparators[0], type(test.ops[0]).__name__
        if op in ("Is", "IsNot") and not (_is_singleton(b) or _is_singleton(a)):
            return None
        for actual, call in ((a, b), (b, a)):  # actual == pytest.approx(expected, rel=, abs=, nan_ok=)
            if op in ("Eq", "NotEq") and _is_call_of(call, "pytest", "approx"):
                if len(call.args) == 1 and {k.arg for k in call.keywords} <= {"rel", "abs", "nan_ok"} and \
                        all(map(_safe, (actual, call.args[0], *[k.value for k in call.keywords]))):
                    return "approx", op, [actual, call.args[0]], call
                return None
        if (op in ("Lt", "LtE") and isinstance(a, ast.Call) and isinstance(a.func, ast.Name) and a.func.id == "abs"
                and len(a.args) == 1 and not a.keywords and isinstance(a.args[0], ast.BinOp)
                and isinstance(a.args[0].op, ast.Sub)):
            x, y = a.args[0].left, a.args[0].right
            return ("absdiff", op, [x, y, b], None) if all(map(_safe, (x, y, b))) else None
        return ("cmp", op, [a, b], None) if _safe(a) and _safe(b) else None
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return ("not", "", [test.operand], None) if _safe(test.operand) else None
    if _is_call_of(test, "math", "isclose"):
        # checked with the captured math.isclose; any other shape is the program's isclose to answer: not covered
        if len(test.args) == 2 and {k.arg for k in test.keywords} <= {"rel_tol", "abs_tol"} and \
                all(map(_safe, test.args)) and all(_safe(k.value) for k in test.keywords):
            return "isclose", "", list(test.args), test
        return None
    return ("truth", "", [test], None) if _safe(test) else None


class _Rewriter(ast.NodeTransformer):
    """Covered asserts -> `yield (kind, op, *operands)`, outside nested functions and classes; counts both."""

    def __init__(self):
        self.covered = self.uncovered = 0

    def visit_Assert(self, node):
        form = covered_form(node.test)
        if form is None:
            self.uncovered += 1
            return node
        self.covered += 1
        kind, op, operands, call = form
        elts = [ast.Constant(kind), ast.Constant(op), *operands]
        if call is not None:  # isclose / approx: its keywords, then the function as written, evaluated as
            # the plain assert would (a NameError when `math` was never imported) but never called
            elts.append(ast.Dict([ast.Constant(k.arg) for k in call.keywords], [k.value for k in call.keywords]))
            elts.append(call.func)
        return ast.copy_location(ast.Expr(ast.Yield(ast.Tuple(elts, ast.Load()))), node)

    def _count_only(self, node):  # nested scopes keep their asserts as written (not covered)
        self.uncovered += sum(isinstance(n, ast.Assert) for n in ast.walk(node))
        return node

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = visit_Lambda = _count_only


def _bound_names(stmts):
    """The names a snippet's top-level statements bind (for the wrapper's `global` line)."""
    names = set()
    for node in stmts:
        todo = [node]
        while todo:
            n = todo.pop()
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(n.name)
                todo.extend(n.decorator_list)
                continue  # its body is its own scope
            if isinstance(n, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
                continue
            if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
                names.add(n.id)
            elif isinstance(n, (ast.Import, ast.ImportFrom)):
                names.update((a.asname or a.name).split(".")[0] for a in n.names)
            elif isinstance(n, ast.ExceptHandler) and n.name:
                names.add(n.name)
            todo.extend(ast.iter_child_nodes(n))
    return sorted(names)


def _wrap_snippet(source):
    """A test snippet -> (code of a generator function running it, covered) or None (not rewritable:
    then it runs as written)."""
    compile(source, "<test>", "exec")  # what does not compile as written (a `return` at the top) stays so
    tree = ast.parse(source)
    if any(isinstance(n, ast.ImportFrom) and any(a.name == "*" for a in n.names) for n in ast.walk(tree)):
        return None  # `import *` is not allowed in a function
    rw = _Rewriter()
    body = [rw.visit(stmt) for stmt in tree.body]
    names = _bound_names(tree.body)
    fn = ast.FunctionDef("__strict_test__", ast.arguments([], [], None, [], [], None, []),
                         ([ast.Global(names)] if names else []) + (body or [ast.Pass()]), [], None, None)
    module = ast.fix_missing_locations(ast.Module([fn], []))
    code = compile(module, "<test>", "exec")
    return _function_code(code, "__strict_test__"), rw.covered > 0 and rw.uncovered == 0


def _function_code(module_code, name):
    (code,) = [c for c in module_code.co_consts if _type(c) is _CodeType and c.co_name == name]
    return code


def prepare(program, tests):
    """Before the program runs: (the program's code, with the asserts of the test functions that tests
    call as `name()` rewritten, {name: that function's code}, [per test: ("fn", name), ("gen", code) or
    ("plain", source)], [covered per test]). Raises SyntaxError when the program does not parse: the
    caller then runs it as written (and it fails as before)."""
    tree = ast.parse(program)
    called = set()
    for t in tests:
        try:
            expr = ast.parse(t, mode="eval").body
        except SyntaxError:
            continue
        if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and not expr.args and not expr.keywords:
            called.add(expr.func.id)
    rewritten = {}  # name -> covered
    for i, node in enumerate(tree.body):
        # zero-argument, undecorated top-level functions only: the runner rebuilds them from their code
        if isinstance(node, ast.FunctionDef) and node.name in called and not node.decorator_list and \
                not (node.args.args or node.args.vararg or node.args.kwarg or node.args.kwonlyargs
                     or node.args.posonlyargs):
            rw = _Rewriter()
            node.body = [rw.visit(stmt) for stmt in node.body]
            rewritten[node.name] = rw.covered > 0 and rw.uncovered == 0
    code = compile(ast.fix_missing_locations(tree), "<program>", "exec")
    # the LAST definition of a name is the one the program's namespace will hold, as the tests would see it
    functions = {}
    for c in code.co_consts:
        if _type(c) is _CodeType and c.co_name in rewritten:
            functions[c.co_name] = c
    plans, covered = [], []
    for t in tests:
        try:
            expr = ast.parse(t, mode="eval").body
            name = expr.func.id if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) else None
        except SyntaxError:
            name = None
        if name in functions and not expr.args and not expr.keywords:
            plans.append(("fn", name))
            covered.append(rewritten[name])
            continue
        try:
            wrapped = _wrap_snippet(t)
        except SyntaxError:
            wrapped = None
        plans.append(("gen", wrapped[0]) if wrapped else ("plain", t))
        covered.append(bool(wrapped and wrapped[1]))
    return code, functions, plans, covered
