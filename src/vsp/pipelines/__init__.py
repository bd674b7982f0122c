"""Pipeline definitions, compilation and the ``vsp`` command line."""
