"""The main job benchmark: `vsp run-local` wall time, faithful (cold and warm) and in-process."""
