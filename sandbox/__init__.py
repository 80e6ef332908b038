"""The sandbox: model-written programs run against unit tests, contained (docs/code-task.md).
run.py: the entry (run_tests, run_batch), isolation modes, resource limits, STRICT_ASSERTS.
worker.py: the two-process verdict from the trainer's side (a program server per program, pooled checkers).
server.py: the program server (the program runs alone in its process and serves calls).
checker.py: the checker process (runs the tests, never executes program code).
wire.py: the values between server and checker.
contain.py: the containment of both runners (whitelist root, uid drop, namespaces), the plain fallback's banner.
confine.py: what each sandboxed process applies to itself (the seccomp allow-list, a fresh keyring; Landlock).
workdir.py: the working directory's bound and its removal.
runner.py: the one-process runner of d1's plain asserts (STRICT_ASSERTS = False).
attacks.py: the containment table (`python -m sandbox.attacks`)."""
