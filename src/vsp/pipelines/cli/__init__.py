"""The `vsp` command line: one module per command group (main holds the group itself)."""
