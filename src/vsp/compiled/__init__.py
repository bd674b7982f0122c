"""The compiled templates (``components/*.yaml``, ``pipelines/*.yaml``), written by ``vsp compile``
and shipped in the wheel as package data (see ``vsp.components.load``)."""
