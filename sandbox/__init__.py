"""The sandbox (issue 36, WIP; docs/issue36-design.md): the program runs alone in its process and
serves calls; the tests run in a checker process that never executes program code. wire.py: the
values between them."""
